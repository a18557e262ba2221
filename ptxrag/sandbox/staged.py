"""Many candidates at once on one machine: compiles across the CPU cores, the GPU through :class:`GpuShare`.

:class:`StagedEvaluator` evaluates concurrent candidates (threads calling :meth:`~StagedEvaluator.evaluate`)
with one :class:`~ptxrag.sandbox.Sandbox`: their compile and static stages take one of ``compile_slots`` CPU
slots, their GPU stages share the GPU (checks by up to ``gpu_shared`` candidates at once; the Nsight Compute
launch and the timing always alone, also against other processes), and warm GPU workers are kept between
candidates. The bench runs its episodes through it; ``benchmarks/sandbox_throughput.py`` measures it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ptxrag.tasks import TaskSpec

from .config import SandboxConfig
from .evaluator import Sandbox
from .gpushare import GpuShare, visible_gpu_id
from .protocol import Evaluator
from .results import EvaluationReport
from .toolchain import detect_gpu


class StagedEvaluator:
    """The local sandbox for many concurrent episodes (threads calling :meth:`evaluate` at once).

    With a GPU here (``gpu_sandbox=True``): one Sandbox evaluates each candidate once; its compile and static
    stages hold one of ``compile_slots`` CPU slots, its GPU stages share the GPU through ``gpu_lock`` (a
    :class:`GpuShare`; default: one for the visible GPU with ``gpu_shared`` checking slots). Without a GPU the
    CPU stages are the whole evaluation (the GPU stages say ``skipped: no GPU``). With an evaluator passed as
    ``gpu_sandbox`` (a test double, a remote sandbox), only candidates that pass a local CPU pass reach it, one
    at a time under the GPU's exclusive lock. ``concurrency`` is how many candidates the caller keeps in flight
    (its threads; default ``compile_slots``): that many GPU workers stay warm, so no candidate waits for a new
    worker to import PyTorch because a finished one was stopped for want of room (the H200 run of 2026-12-04,
    four threads and two idle workers, restarted two workers every round)."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        compile_slots: int | None = None,
        gpu_sandbox: Evaluator | None | bool = True,
        gpu_lock: GpuShare | None = None,
        gpu_shared: int = 1,
        concurrency: int | None = None,
    ) -> None:
        self.compile_slots = max(1, compile_slots or os.cpu_count() or 1)
        self._slots = threading.BoundedSemaphore(self.compile_slots)
        self._count_lock = threading.Lock()
        self._same_source: dict[str, threading.Lock] = {}
        self._current = threading.local()  # the source key of the evaluation running in this thread
        self.cpu_evaluations = 0
        self.gpu_evaluations = 0
        base = config or SandboxConfig()
        self.gpu: Evaluator | None = None
        self.lock: GpuShare | None = None
        self._own_gpu = False  # True: self.cpu is the one sandbox, GPU stages included
        if gpu_sandbox is True:
            gpu = detect_gpu()
            if gpu is not None:
                self.lock = gpu_lock or GpuShare(visible_gpu_id(), shared=gpu_shared)
                self._own_gpu = True
            cfg = dataclasses.replace(
                base,
                gpu_share=self.lock,
                cpu_lock=self._cpu_slot,
                idle_workers=max(base.idle_workers, gpu_shared, concurrency or self.compile_slots),
            )
            self.cpu = Sandbox(cfg, gpu=gpu or False)
            if gpu is not None:
                self.gpu = self.cpu
        else:
            self.cpu = Sandbox(dataclasses.replace(base, cpu_lock=self._cpu_slot), gpu=False)
            self.gpu = gpu_sandbox or None
            self.lock = (gpu_lock or GpuShare(visible_gpu_id())) if self.gpu is not None else None

    def _source_lock(self, key: str) -> threading.Lock:
        with self._count_lock:
            return self._same_source.setdefault(key, threading.Lock())

    @contextmanager
    def _cpu_slot(self) -> Iterator[None]:
        # Identical candidates (samples of a deterministic model, a replay under several conditions) are
        # compiled once: the second waits and hits the compile cache instead of racing the first to fill it.
        key = getattr(self._current, "key", None)
        with self._source_lock(key) if key else contextlib.nullcontext(), self._slots:
            yield

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        self._current.key = hashlib.sha256(f"{task.id}\0{task.gencode}\0{source}".encode()).hexdigest()
        try:
            first = self.cpu.evaluate(task, source)
        finally:
            self._current.key = None
        with self._count_lock:
            self.cpu_evaluations += 1
            if self._own_gpu and first.correctness.status != "skipped":
                self.gpu_evaluations += 1
        if self._own_gpu or self.gpu is None or self.lock is None or first.first_failure is not None:
            return first
        with self.lock.exclusive():
            report = self.gpu.evaluate(task, source)
        with self._count_lock:
            self.gpu_evaluations += 1
        return report

    def close(self) -> None:
        """Stop the sandbox's warm GPU workers."""
        self.cpu.close()


__all__ = ["StagedEvaluator"]
