"""Task spec loading and validation errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ptxrag.tasks import TaskError, builtin_suite_dir, list_tasks, load_task, load_task_dir


def _copy(tmp_path: Path, task_id: str = "warp-reduce-redux") -> Path:
    dst = tmp_path / task_id
    shutil.copytree(builtin_suite_dir() / task_id, dst)
    return dst


def test_bundled_tasks_load():
    ids = [t.id for t in list_tasks()]
    assert {"warp-reduce-redux", "bulk-copy-scale"} <= set(ids)
    t = load_task("warp-reduce-redux")
    assert t.required_ptx == ["redux.sync"] and t.gencode == "-gencode=arch=compute_90a,code=sm_90a"
    assert t.solution_source().startswith("//")


def test_unknown_task_lists_known_ones():
    with pytest.raises(TaskError, match="unknown task 'nope'.*warp-reduce-redux"):
        load_task("nope")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace("level = 1", "level = 7"), "level"),
        (lambda s: s.replace('arch = "sm_90a"', 'arch = "sm_91x"'), "arch"),
        (lambda s: s.replace("{ rows = 1000, cols = 999 }", "{ rows = 1000 }"), "does not set dimension"),
        (lambda s: s.replace('file = "controls/hang.cu"', 'file = "controls/missing.cu"'), "does not exist"),
        (lambda s: s.replace('id = "warp-reduce-redux"', 'id = "other-id"'), "must equal the folder name"),
        (lambda s: s + "\n[[inputs]\n", "not valid TOML"),
        (lambda s: s.replace('must_fail_at = "execution"', 'must_fail_at = "later"'), "must_fail_at"),
    ],
)
def test_broken_specs_get_clear_errors(tmp_path, edit, message):
    folder = _copy(tmp_path)
    spec = folder / "task.toml"
    spec.write_text(edit(spec.read_text()))
    with pytest.raises(TaskError, match=message) as e:
        load_task_dir(folder)
    assert str(spec) in str(e.value)


def test_user_tasks_path(tmp_path, monkeypatch):
    folder = _copy(tmp_path)
    (folder / "task.toml").write_text(
        (folder / "task.toml").read_text().replace('"warp-reduce-redux"', '"my-task"')
    )
    folder.rename(tmp_path / "my-task")
    monkeypatch.setenv("PTXRAG_TASKS_PATH", str(tmp_path))
    assert load_task("my-task").root == tmp_path / "my-task"
