"""Find, load and validate task folders."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ptxrag.base.errors import TaskInputError

from .spec import TaskSpec

TASK_FILE = "task.toml"


class TaskError(TaskInputError, ValueError):
    """A task folder or spec is broken. The message names the file and what to fix."""


def builtin_suite_dir() -> Path:
    """The task suite shipped with ptxrag."""
    return Path(str(resources.files("ptxrag.tasks") / "suite"))


def search_dirs(extra: Iterable[Path] = ()) -> list[Path]:
    """Task roots: explicit ones, then ``PTXRAG_TASKS_PATH`` (os.pathsep-separated), then the suite."""
    dirs = [Path(p) for p in extra]
    env = os.environ.get("PTXRAG_TASKS_PATH", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs.append(builtin_suite_dir())
    return dirs


def load_task_dir(folder: Path) -> TaskSpec:
    """Load and validate one task folder; every referenced file must exist."""
    spec_file = folder / TASK_FILE
    if not spec_file.is_file():
        raise TaskError(f"{folder}: no {TASK_FILE}")
    try:
        data = tomllib.loads(spec_file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{spec_file}: not valid TOML: {e}") from e
    statement_file = data.pop("statement_file", None)
    if statement_file is not None:
        p = folder / statement_file
        if not p.is_file():
            raise TaskError(f"{spec_file}: statement_file {statement_file!r} does not exist")
        data["statement"] = p.read_text()
    try:
        task = TaskSpec.model_validate({**data, "root": folder})
    except ValidationError as e:
        lines = [f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()]
        raise TaskError(f"{spec_file}: invalid task spec:\n  " + "\n  ".join(lines)) from None
    if task.id != folder.name:
        raise TaskError(f"{spec_file}: id {task.id!r} must equal the folder name {folder.name!r}")
    for rel in [
        task.reference.file,
        task.solution,
        *(c.file for c in task.controls),
        *(a.file for a in task.alternatives),
    ]:
        if not (folder / rel).is_file():
            raise TaskError(f"{spec_file}: referenced file {rel!r} does not exist")
    # whether the sandbox can prove each required_ptx executed is checked by ptxrag.bench.task_validation
    # (``ptxrag tasks validate``): the opcode table is the sandbox's, and tasks do not import the sandbox
    return task


def list_tasks(extra_dirs: Iterable[Path] = ()) -> list[TaskSpec]:
    """All tasks in the search path; the first folder with a given id wins."""
    seen: dict[str, TaskSpec] = {}
    for root in search_dirs(extra_dirs):
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if (p / TASK_FILE).is_file()):
            if folder.name not in seen:
                seen[folder.name] = load_task_dir(folder)
    return sorted(seen.values(), key=lambda t: (t.level, t.id))


def load_task(task_id: str, extra_dirs: Iterable[Path] = ()) -> TaskSpec:
    """Load a task by id, or by a path to its folder."""
    p = Path(task_id)
    if (p / TASK_FILE).is_file():
        return load_task_dir(p)
    for root in search_dirs(extra_dirs):
        folder = root / task_id
        if (folder / TASK_FILE).is_file():
            return load_task_dir(folder)
    known = ", ".join(t.id for t in list_tasks(extra_dirs)) or "(none)"
    raise TaskError(f"unknown task {task_id!r}; known tasks: {known}")
