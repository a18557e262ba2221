"""Hostile task folders (issue 16, "Task specs"): paths that lead out of the task folder, shapes and values
that cannot be honoured, binary or garbled files, and a broken task on the search path. Each attack must be
refused at load time with a TaskError that names the file and says why; the bundled suite still loads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.cli import app
from ptxrag.tasks import TaskError, builtin_suite_dir, list_tasks, load_task, load_task_dir, scan_tasks
from ptxrag.tasks.loader import MAX_TEXT_BYTES
from ptxrag.tasks.spec import gpu_memory_bytes

SECRET = "root:$6$not-a-real-hash:19000:0:99999:7:::"

runner = CliRunner()


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A private copy of warp-reduce-redux renamed to my-task, beside a 'secret' file outside the folder."""
    (tmp_path / "tasks").mkdir()
    dst = tmp_path / "tasks" / "my-task"
    shutil.copytree(builtin_suite_dir() / "warp-reduce-redux", dst)
    _edit(dst, 'id = "warp-reduce-redux"', 'id = "my-task"')
    (tmp_path / "shadow").write_text(SECRET + "\n")
    return dst


def _edit(folder: Path, old: str, new: str) -> None:
    toml = folder / "task.toml"
    text = toml.read_text()
    assert old in text, f"fixture drifted: {old!r} not in task.toml"
    toml.write_text(text.replace(old, new, 1))


def _refused(folder: Path, *words: str) -> str:
    with pytest.raises(TaskError) as err:
        load_task_dir(folder)
    msg = str(err.value)
    assert str(folder) in msg, f"the message must name the task: {msg}"
    for w in words:
        assert w in msg, f"{w!r} missing from: {msg}"
    assert SECRET not in msg
    return msg


# -- paths ---------------------------------------------------------------------------------------------
PATH_FIELDS = [
    # (field, where it sits in task.toml: old text -> new text with {p})
    ("statement_file", 'statement = """', 'statement_file = "{p}"\nnot_statement = """'),
    ("solution", "level = 1", 'level = 1\nsolution = "{p}"'),
    ("controls[0].file", 'file = "controls/dead_redux.cu"', 'file = "{p}"'),
    ("reference.file", "[reference]", '[reference]\nfile = "{p}"'),
    (
        "alternatives[0].file",
        "[shapes]",
        '[[alternatives]]\nfile = "{p}"\nwhy = "another honest kernel"\n\n[shapes]',
    ),
]


def _point(folder: Path, field: str, p: str) -> None:
    old, new = next((o, n) for f, o, n in PATH_FIELDS if f == field)
    if field == "statement_file":  # replace the inline statement by a statement_file
        text = (folder / "task.toml").read_text()
        start = text.index('statement = """')
        end = text.index('"""', start + len('statement = """')) + 3
        (folder / "task.toml").write_text(text[:start] + f'statement_file = "{p}"' + text[end:])
        return
    _edit(folder, old, new.format(p=p))


@pytest.mark.parametrize("field", [f for f, _, _ in PATH_FIELDS])
def test_relative_path_out_of_the_task_folder_is_refused(task_dir: Path, field: str) -> None:
    _point(task_dir, field, "../../shadow")
    assert (task_dir / "../../shadow").is_file()  # the attack would reach a real file
    _refused(task_dir, field, "leads outside the task folder")


@pytest.mark.parametrize("field", [f for f, _, _ in PATH_FIELDS])
def test_absolute_path_is_refused(task_dir: Path, field: str) -> None:
    _point(task_dir, field, str(task_dir.parent.parent / "shadow"))
    _refused(task_dir, field, "must be relative to the task folder")


def test_symlink_out_of_the_task_folder_is_refused(task_dir: Path) -> None:
    (task_dir / "solution.cu").unlink()
    os.symlink(task_dir.parent.parent / "shadow", task_dir / "solution.cu")
    _refused(task_dir, "solution", "leads outside the task folder")


def test_statement_from_outside_never_reaches_the_prompt(task_dir: Path) -> None:
    _point(task_dir, "statement_file", "../../shadow")
    with pytest.raises(TaskError):
        load_task(str(task_dir))
    # a path inside the folder still works
    (task_dir / "statement.md").write_text("Reduce each row with redux.sync.\n")
    _point_back = (task_dir / "task.toml").read_text().replace("../../shadow", "statement.md")
    (task_dir / "task.toml").write_text(_point_back)
    assert load_task_dir(task_dir).statement.startswith("Reduce each row")


def test_task_path_refuses_to_leave_the_folder(task_dir: Path) -> None:
    task = load_task_dir(task_dir)
    with pytest.raises(TaskError, match="leads outside"):
        task.path("../../shadow")
    with pytest.raises(TaskError, match="must be relative"):
        task.path("/etc/passwd")
    assert task.path("controls/hang.cu").is_file()


def test_service_style_lookup_takes_ids_not_paths(task_dir: Path) -> None:
    for bad in (str(task_dir), "../suite/warp-reduce-redux", "/tmp/x", "warp-reduce-redux\n", "a/b"):
        with pytest.raises(TaskError, match="not a task id"):
            load_task(bad, by_path=False)
    assert load_task("warp-reduce-redux", by_path=False).id == "warp-reduce-redux"
    assert load_task(str(task_dir)).id == "my-task"  # the CLI may still name a folder


# -- bounds --------------------------------------------------------------------------------------------
MEM, _ = gpu_memory_bytes("sm_90a")

BOUNDS = [
    # (attack, old, new, words in the message)
    ("dimension beyond int64", "{ rows = 1000, cols = 999 }", "{ rows = 9223372036854775808, cols = 999 }",
     ["shapes.check[1]", "int64"]),
    ("fixed dimension beyond int64", 'shape = ["rows", "cols"]', 'shape = ["rows", 9223372036854775808]',
     ["inputs.0.shape", "int64"]),
    ("element count beyond int64", "{ rows = 1000, cols = 999 }", "{ rows = 4611686018427387904, cols = 999 }",
     ["shapes.check[1]", "beyond int64"]),
    ("inputs larger than the GPU", "timing = { rows = 65536, cols = 1024 }",
     "timing = { rows = 1000000, cols = 1000000 }", ["shapes.timing", "4 TB", "141 GB", "h200"]),
    ("workspace of 2^63-1 bytes", "level = 1", "level = 1\nworkspace_bytes = 9223372036854775807",
     ["shapes.check[0]", "141 GB"]),
    ("negative workspace", "level = 1", "level = 1\nworkspace_bytes = -1", ["workspace_bytes"]),
    ("nan atol", "atol = 0", "atol = nan", ["tolerance.atol", "finite"]),
    ("inf rtol", "rtol = 0", "rtol = inf", ["tolerance.rtol", "finite"]),
    ("negative atol", "atol = 0", "atol = -1.0", ["tolerance.atol"]),
    ("inf init high", "high = 1000 }", "high = inf }", ["inputs.0.init.high", "finite"]),
    ("nan init low", "low = -1000,", "low = nan,", ["inputs.0.init.low", "finite"]),
    ("randint beyond int32", "high = 1000 }", "high = 1e12 }", ["does not fit int32"]),
    ("warmup of a billion", "[shapes]", "[timing]\nwarmup = 1000000000\n\n[shapes]", ["timing.warmup"]),
    ("zero repetitions", "[shapes]", "[timing]\nreps = 0\n\n[shapes]", ["timing.reps"]),
    ("nan plausible speedup", "[shapes]", "[timing]\nmax_plausible_speedup = nan\n\n[shapes]",
     ["max_plausible_speedup"]),
    ("nan scalar", "[shapes]", '[[scalars]]\nname = "alpha"\nvalue = nan\n\n[shapes]', ["scalars.0.value", "finite"]),
    ("a thousand check sets", "check = [", "check = [" + "{ rows = 64, cols = 64 }, " * 1000,
     ["shapes.check", "at most 32"]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "old", "new", "words"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_out_of_bounds_values_are_refused_at_load(
    task_dir: Path, what: str, old: str, new: str, words: list[str]
) -> None:
    _edit(task_dir, old, new)
    _refused(task_dir, *words)


def test_float_init_that_overflows_the_dtype_is_refused(tmp_path: Path) -> None:
    dst = tmp_path / "my-task"
    shutil.copytree(builtin_suite_dir() / "tma-bias-scale-2d", dst)
    _edit(dst, 'id = "tma-bias-scale-2d"', 'id = "my-task"')
    text = (dst / "task.toml").read_text()
    assert 'dtype = "float32"' in text
    _edit(dst, 'dtype = "float32"', 'dtype = "float32"\ninit = { kind = "normal", std = 1e300 }')
    _refused(dst, "inputs.0", "beyond the largest finite float32")


def test_memory_bound_comes_from_the_hardware_cards() -> None:
    mem, source = gpu_memory_bytes("sm_90a")
    assert mem == 141 * 10**9 and "h200" in source  # the H200 card: 141 GB
    mem80, source80 = gpu_memory_bytes("sm_80")  # no Ampere card: the largest card of any arch
    assert mem80 >= mem and "any arch" in source80


def test_the_memory_table_matches_the_hardware_cards() -> None:
    from ptxrag.corpus.cards import hardware_card, list_hardware
    from ptxrag.tasks.spec import LARGEST_GPU_MEMORY

    largest: dict[tuple[int, int], tuple[int, str]] = {}
    for name in list_hardware():
        c = hardware_card(name)
        cc = tuple(int(x) for x in c.compute_capability.split("."))
        mem = (int(c.memory_gb.value * 10**9), c.name)
        if cc not in largest or mem > largest[cc]:
            largest[cc] = mem  # type: ignore[index]
    assert largest == LARGEST_GPU_MEMORY


def test_the_largest_shape_that_fits_still_loads(task_dir: Path) -> None:
    # int32 rows x cols in, rows out: just under the H200's memory loads, just over is refused
    rows, cols = 1 << 20, (MEM // 4 // (1 << 20)) - 1
    _edit(task_dir, "timing = { rows = 65536, cols = 1024 }", f"timing = {{ rows = {rows}, cols = {cols} }}")
    assert load_task_dir(task_dir).shapes.timing == {"rows": rows, "cols": cols}
    _edit(task_dir, f"cols = {cols} }}", f"cols = {cols + 2} }}")
    _refused(task_dir, "shapes.timing", "141 GB")


# -- garbled files -------------------------------------------------------------------------------------
def test_binary_task_toml_gives_a_clear_error(task_dir: Path) -> None:
    (task_dir / "task.toml").write_bytes(bytes(range(256)) * 8)
    _refused(task_dir, "task.toml", "not UTF-8 text", "binary")
    res = runner.invoke(app, ["tasks", "show", str(task_dir)])
    assert res.exit_code == 2 and "not UTF-8 text" in res.stderr
    assert "Traceback" not in res.output + res.stderr


def test_control_characters_in_task_toml_give_a_clear_error(task_dir: Path) -> None:
    (task_dir / "task.toml").write_bytes(b'id = "my-\x00task"\n\x01\x02\x03')
    _refused(task_dir, "not valid TOML")


def test_huge_task_toml_is_refused_before_parsing(task_dir: Path) -> None:
    (task_dir / "task.toml").write_text("# " + "x" * MAX_TEXT_BYTES + "\n")
    _refused(task_dir, "task.toml", "more than the")


def test_binary_statement_file_gives_a_clear_error(task_dir: Path) -> None:
    (task_dir / "statement.md").write_bytes(b"\xff\xfe\x00garbage")
    _point(task_dir, "statement_file", "statement.md")
    _refused(task_dir, "statement_file", "not UTF-8 text")


def test_statement_file_that_is_not_a_string(task_dir: Path) -> None:
    _point(task_dir, "statement_file", "x")
    _edit(task_dir, 'statement_file = "x"', "statement_file = 3")
    _refused(task_dir, "statement_file must be a path")


# -- one broken task on the search path ----------------------------------------------------------------
@pytest.fixture
def tasks_path(task_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PTXRAG_TASKS_PATH with my-task (good) and bad-task (a binary task.toml)."""
    bad = task_dir.parent / "bad-task"
    bad.mkdir()
    (bad / "task.toml").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xff")
    monkeypatch.setenv("PTXRAG_TASKS_PATH", str(task_dir.parent))
    return bad


def test_tasks_list_skips_a_broken_task_and_lists_the_others(tasks_path: Path) -> None:
    res = runner.invoke(app, ["tasks", "list", "--json"])
    assert res.exit_code == 0, res.output + res.stderr
    ids = {t["id"] for t in json.loads(res.stdout)}
    assert {"my-task", "warp-reduce-redux", "gemm-wgmma-bf16"} <= ids and "bad-task" not in ids
    assert "skipped broken task" in res.stderr and str(tasks_path) in res.stderr
    assert "not UTF-8 text" in res.stderr
    res = runner.invoke(app, ["tasks", "list"])  # the table too
    assert res.exit_code == 0 and "my-task" in res.stdout and "bad-task" in res.stderr


def test_library_listing_skips_it_and_loading_it_by_name_still_fails(tasks_path: Path) -> None:
    assert "my-task" in {t.id for t in list_tasks()}
    assert [b.folder for b in scan_tasks().broken] == [tasks_path]
    with pytest.raises(TaskError, match="not UTF-8"):
        load_task("bad-task")
    with pytest.raises(TaskError, match="unknown task"):  # the error for another id is not the broken one
        load_task("no-such-task")


def test_validate_all_fails_on_a_broken_task(tasks_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ptxrag.tasks import TaskScan
    from ptxrag.tasks.loader import BrokenTask

    broken = scan_tasks().broken
    # validate only the broken folder (validating the suite would compile every task)
    monkeypatch.setattr("ptxrag.tasks.scan_tasks", lambda: TaskScan([], list(broken)))
    assert isinstance(broken[0], BrokenTask)
    res = runner.invoke(app, ["tasks", "validate", "--all"])
    assert res.exit_code == 1 and "do not load" in res.stdout and "bad-task" in res.stderr


def test_the_bundled_suite_still_loads() -> None:
    scan = scan_tasks()
    suite = sorted(p.name for p in builtin_suite_dir().iterdir() if (p / "task.toml").is_file())
    assert scan.broken == [] and sorted(t.id for t in scan.tasks) == suite
