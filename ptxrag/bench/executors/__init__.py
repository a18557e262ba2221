"""Where episodes run: ``local`` (threads on this machine) or ``ray`` (tasks on a Ray cluster)."""

from __future__ import annotations

from typing import Any, Literal

from .base import Executor, LockedRetriever, RunContext, episode_dir, needs_retrieval, run_episode
from .gpu import GpuLock, StagedEvaluator, visible_gpu_id
from .local import LocalExecutor

ExecutorName = Literal["local", "ray"]


def make_executor(name: str, **options: Any) -> Executor:
    """``local`` takes ``workers``, ``compile_slots``; ``ray`` takes ``address``, ``workers``,
    ``num_cpus``, ``object_store_mb``."""
    if name == "local":
        return LocalExecutor(**options)
    if name == "ray":
        from .ray_cluster import RayExecutor

        return RayExecutor(**options)
    raise ValueError(f"unknown executor {name!r}; use local or ray")


__all__ = [
    "Executor",
    "ExecutorName",
    "GpuLock",
    "LocalExecutor",
    "LockedRetriever",
    "RunContext",
    "StagedEvaluator",
    "episode_dir",
    "make_executor",
    "needs_retrieval",
    "run_episode",
    "visible_gpu_id",
]
