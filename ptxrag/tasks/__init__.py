"""Benchmark tasks: specs, PyTorch references, reference solutions and negative controls."""

from .loader import (
    BrokenTask,
    TaskError,
    TaskScan,
    builtin_suite_dir,
    list_tasks,
    load_task,
    load_task_dir,
    scan_tasks,
)
from .spec import ARCHS, COUNTS_FILE, FORBIDDABLE, ControlSpec, TaskSpec, TensorSpec

__all__ = [
    "ARCHS",
    "BrokenTask",
    "COUNTS_FILE",
    "FORBIDDABLE",
    "ControlSpec",
    "TaskError",
    "TaskScan",
    "TaskSpec",
    "TensorSpec",
    "builtin_suite_dir",
    "list_tasks",
    "load_task",
    "load_task_dir",
    "scan_tasks",
]
