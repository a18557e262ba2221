"""Find, load and validate task folders."""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from .spec import TaskError, TaskSpec, inside_folder, is_task_id

TASK_FILE = "task.toml"

#: a task.toml or statement file larger than this is refused (a statement goes into every prompt)
MAX_TEXT_BYTES = 1 << 20

log = logging.getLogger(__name__)


def _read_text(path: Path, what: str) -> str:
    """A task text file as UTF-8, or a TaskError saying why not (too large, binary, unreadable)."""
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise TaskError(f"{what}: {size} bytes, more than the {MAX_TEXT_BYTES} a task text file may have")
        raw = path.read_bytes()
    except OSError as e:
        raise TaskError(f"{what}: cannot read: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TaskError(
            f"{what}: not UTF-8 text (byte {e.start} is {raw[e.start : e.start + 1]!r}); is it a binary file?"
        ) from None


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
        data = tomllib.loads(_read_text(spec_file, str(spec_file)))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{spec_file}: not valid TOML: {e}") from None
    statement_file = data.pop("statement_file", None)
    if statement_file is not None:
        if not isinstance(statement_file, str):
            raise TaskError(f"{spec_file}: statement_file must be a path (a string)")
        p = inside_folder(folder, statement_file, f"{spec_file}: statement_file")
        if not p.is_file():
            raise TaskError(f"{spec_file}: statement_file {statement_file!r} does not exist")
        data["statement"] = _read_text(p, f"{spec_file}: statement_file {statement_file!r}")
    try:
        task = TaskSpec.model_validate({**data, "root": folder})
    except ValidationError as e:
        lines = [f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()]
        raise TaskError(f"{spec_file}: invalid task spec:\n  " + "\n  ".join(lines)) from None
    if task.id != folder.name:
        raise TaskError(f"{spec_file}: id {task.id!r} must equal the folder name {folder.name!r}")
    for what, rel in [
        ("reference.file", task.reference.file),
        ("solution", task.solution),
        *((f"controls[{i}].file", c.file) for i, c in enumerate(task.controls)),
        *((f"alternatives[{i}].file", a.file) for i, a in enumerate(task.alternatives)),
    ]:
        if not inside_folder(folder, rel, f"{spec_file}: {what}").is_file():
            raise TaskError(f"{spec_file}: referenced file {rel!r} does not exist")
    # whether the sandbox can prove each required_ptx executed is checked by ptxrag.bench.task_validation
    # (``ptxrag tasks validate``): the opcode table is the sandbox's, and tasks do not import the sandbox
    return task


@dataclass(frozen=True)
class BrokenTask:
    """A task folder on the search path that does not load, and why."""

    folder: Path
    error: TaskError


@dataclass(frozen=True)
class TaskScan:
    """Every task folder on the search path: those that load, and those that do not."""

    tasks: list[TaskSpec] = field(default_factory=list)
    broken: list[BrokenTask] = field(default_factory=list)


def scan_tasks(extra_dirs: Iterable[Path] = ()) -> TaskScan:
    """Load every task on the search path; a broken folder is recorded in ``broken``, never raised, so one
    bad task does not hide the others. The first folder with a given name wins: a broken one still takes
    its name (the same id further down the path is not listed, as ``load_task`` would not reach it)."""
    seen: dict[str, TaskSpec | None] = {}
    broken: list[BrokenTask] = []
    for root in search_dirs(extra_dirs):
        if not root.is_dir():
            continue
        try:
            folders = sorted(p for p in root.iterdir() if (p / TASK_FILE).is_file())
        except OSError as e:
            broken.append(BrokenTask(root, TaskError(f"{root}: cannot list the folder: {e.strerror or e}")))
            continue
        for folder in folders:
            if folder.name in seen:
                continue
            try:
                seen[folder.name] = load_task_dir(folder)
            except TaskError as e:
                seen[folder.name] = None
                broken.append(BrokenTask(folder, e))
    tasks = sorted((t for t in seen.values() if t is not None), key=lambda t: (t.level, t.id))
    return TaskScan(tasks, broken)


def list_tasks(extra_dirs: Iterable[Path] = ()) -> list[TaskSpec]:
    """All tasks in the search path that load; broken ones are skipped with a logged warning (use
    :func:`scan_tasks` to get them). The first folder with a given id wins."""
    scan = scan_tasks(extra_dirs)
    for b in scan.broken:
        log.warning("skipped broken task %s: %s", b.folder, b.error)
    return scan.tasks


def load_task(task_id: str, extra_dirs: Iterable[Path] = (), *, by_path: bool = True) -> TaskSpec:
    """Load a task by id, or (``by_path``, the default) by a path to its folder. With ``by_path=False``
    only the id of a task on the search path is accepted: what a remote client may name."""
    if by_path:
        p = Path(task_id)
        if (p / TASK_FILE).is_file():
            return load_task_dir(p)
    if not is_task_id(task_id):
        where = "" if not by_path else "no task folder is there and "
        raise TaskError(
            f"{task_id!r}: {where}it is not a task id; name a registered task "
            "(2-64 lowercase letters, digits and dashes), not a path"
        )
    for root in search_dirs(extra_dirs):
        folder = root / task_id
        if (folder / TASK_FILE).is_file():
            return load_task_dir(folder)
    known = ", ".join(t.id for t in list_tasks(extra_dirs)) or "(none)"
    raise TaskError(f"unknown task {task_id!r}; known tasks: {known}")
