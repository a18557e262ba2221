"""Sharing the hardware in a bench: the sandbox's :class:`~ptxrag.sandbox.staged.StagedEvaluator` and
:class:`~ptxrag.sandbox.gpushare.GpuShare`, under the names the bench has exported."""

from __future__ import annotations

from ptxrag.sandbox.gpushare import GpuShare, default_lock_dir, visible_gpu_id
from ptxrag.sandbox.staged import StagedEvaluator

#: the name earlier releases exported: a GpuShare used with ``hold()`` is exclusive use of the GPU
GpuLock = GpuShare

__all__ = ["GpuLock", "GpuShare", "StagedEvaluator", "default_lock_dir", "visible_gpu_id"]
