"""Suite-level loader checks: a renamed copy of a bundled TMA task, broken in many ways, is rejected with errors
that name the file and the fix, and the loader changes nothing on disk (tests/test_tasks_loader.py has the
basic loader tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ptxrag.tasks import TaskError, list_tasks, load_task, load_task_dir, scan_tasks
from ptxrag.tasks.loader import builtin_suite_dir


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A private copy of a bundled task, renamed, to break in different ways."""
    dst = tmp_path / "my-task"
    shutil.copytree(builtin_suite_dir() / "tma-bias-scale-2d", dst)
    toml = dst / "task.toml"
    toml.write_text(toml.read_text().replace('id = "tma-bias-scale-2d"', 'id = "my-task"'))
    return dst


def _edit(folder: Path, old: str, new: str) -> None:
    toml = folder / "task.toml"
    text = toml.read_text()
    assert old in text, f"fixture drifted: {old!r} not in task.toml"
    toml.write_text(text.replace(old, new, 1))


def test_a_good_copy_loads(task_dir: Path) -> None:
    task = load_task_dir(task_dir)
    assert task.id == "my-task" and task.root == task_dir
    assert load_task(str(task_dir)).id == "my-task"  # by path too


BROKEN = [
    # (what breaks, old text, new text, words the message must contain)
    (
        "id differs from folder",
        'id = "my-task"',
        'id = "other-task"',
        ["must equal the folder name", "my-task"],
    ),
    ("bad id characters", 'id = "my-task"', 'id = "My Task"', ["id", "lowercase"]),
    ("unknown arch", 'arch = "sm_90a"', 'arch = "sm_70"', ["arch", "sm_70", "is not one of"]),
    ("unknown field (typo)", "required_ptx = [", "requried_ptx = [", ["requried_ptx", "Extra inputs"]),
    ("bad stage name", 'must_fail_at = "static"', 'must_fail_at = "runtime"', ["controls.0.must_fail_at"]),
    (
        "missing control file",
        'file = "controls/plain_loads.cu"',
        'file = "controls/gone.cu"',
        ["controls/gone.cu", "does not exist"],
    ),
    (
        "check shape lacks a dimension",
        "{ rows = 4096, cols = 4096 }",
        "{ rows = 4096 }",
        ["shapes.check[0]", "cols"],
    ),
    ("awkward index out of range", "awkward = [1]", "awkward = [5]", ["awkward", "5", "not a check set"]),
    (
        "non-positive dimension",
        "{ rows = 999, cols = 1000 }",
        "{ rows = 0, cols = 1000 }",
        ["shapes.check[1]", "positive"],
    ),
    (
        "unknown forbidden kind",
        'family = "tma"',
        'family = "tma"\nforbidden = ["cublas", "openblas"]',
        ["openblas"],
    ),
    ("unknown dtype", 'dtype = "float32"', 'dtype = "float24"', ["inputs.0.dtype"]),
    ("not TOML", "[shapes]", "[shapes", ["not valid TOML"]),
]


@pytest.mark.parametrize(("what", "old", "new", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_spec_is_rejected_clearly(
    task_dir: Path, what: str, old: str, new: str, words: list[str]
) -> None:
    _edit(task_dir, old, new)
    before = {p: p.read_bytes() for p in task_dir.rglob("*") if p.is_file()}
    with pytest.raises(TaskError) as err:
        load_task_dir(task_dir)
    msg = str(err.value)
    assert str(task_dir / "task.toml") in msg or str(task_dir) in msg, (
        f"{what}: the message must name the file: {msg}"
    )
    for w in words:
        assert w in msg, f"{what}: {w!r} missing from: {msg}"
    after = {p: p.read_bytes() for p in task_dir.rglob("*") if p.is_file()}
    assert after == before, "loading must not touch the task folder"


def test_missing_reference_and_solution_files(task_dir: Path) -> None:
    (task_dir / "solution.cu").unlink()
    with pytest.raises(TaskError, match=r"referenced file 'solution\.cu' does not exist"):
        load_task_dir(task_dir)


def test_folder_without_spec(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no task.toml"):
        load_task_dir(tmp_path)


def test_unknown_task_id_lists_the_known_ones() -> None:
    with pytest.raises(TaskError) as err:
        load_task("no-such-task")
    assert "gemm-wgmma-bf16" in str(err.value)


def test_a_broken_task_on_the_search_path_is_reported_and_skipped(task_dir: Path) -> None:
    _edit(task_dir, 'arch = "sm_90a"', 'arch = "sm_70"')
    scan = scan_tasks(extra_dirs=[task_dir.parent])
    assert [b.folder for b in scan.broken] == [task_dir]
    assert "sm_70" in str(scan.broken[0].error)
    ids = {t.id for t in scan.tasks}
    assert "my-task" not in ids and "tma-bias-scale-2d" in ids  # the others still load
    assert {t.id for t in list_tasks(extra_dirs=[task_dir.parent])} == ids
    with pytest.raises(TaskError, match="sm_70"):  # asked for by name, the error is raised
        load_task("my-task", extra_dirs=[task_dir.parent])
