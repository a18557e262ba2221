"""Benchmark tasks: specs, PyTorch references, reference solutions and negative controls."""

from .loader import TaskError, builtin_suite_dir, list_tasks, load_task, load_task_dir
from .spec import ARCHS, COUNTS_FILE, FORBIDDABLE, ControlSpec, TaskSpec, TensorSpec

__all__ = [
    "ARCHS",
    "COUNTS_FILE",
    "FORBIDDABLE",
    "ControlSpec",
    "TaskError",
    "TaskSpec",
    "TensorSpec",
    "builtin_suite_dir",
    "list_tasks",
    "load_task",
    "load_task_dir",
]
