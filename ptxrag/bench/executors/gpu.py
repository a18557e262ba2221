"""Sharing the hardware: compiles across CPU cores, GPU stages one at a time per GPU.

Correct timings and Nsight Compute's counters need the GPU to themselves, so the GPU stages of two
candidates must never overlap on one GPU, within this process or across processes (two benches, or a bench
and a manual ``ptxrag sandbox check``). :class:`StagedEvaluator` runs every candidate's CPU stages (compile,
static SASS check) at once, up to a number of slots, and only candidates that pass them queue for the GPU,
where the sandbox evaluates them again in full (the compile is then a cache hit).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ptxrag.sandbox import EvaluationReport, Sandbox, SandboxConfig, detect_gpu
from ptxrag.sandbox.protocol import Evaluator
from ptxrag.tasks import TaskSpec


def visible_gpu_id() -> str:
    """The GPU the sandbox uses (the first visible one), as a name for its lock file."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    return re.sub(r"[^A-Za-z0-9_-]", "-", first)


def default_lock_dir() -> Path:
    """Per machine, shared by every user's benches: GPU stages must not overlap whoever runs them."""
    return Path(tempfile.gettempdir()) / "ptxrag-gpu-locks"


class GpuLock:
    """Exclusive use of one GPU: a thread lock (this process) plus ``flock`` on a per-GPU file (other
    processes). The kernel drops a flock when its holder dies, so a killed bench never leaves it held."""

    def __init__(self, gpu_id: str = "0", lock_dir: Path | None = None) -> None:
        d = lock_dir or default_lock_dir()
        d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # someone else's folder: leave its mode
            d.chmod(0o1777)
        self.path = d / f"gpu-{gpu_id}.lock"
        self._thread_lock = threading.Lock()
        self.waited_s = 0.0

    @contextmanager
    def hold(self) -> Iterator[None]:
        t0 = time.monotonic()
        with self._thread_lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.waited_s += time.monotonic() - t0
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


class StagedEvaluator:
    """The local sandbox for many concurrent episodes: CPU stages in parallel (``compile_slots`` at once),
    GPU stages serialized by a :class:`GpuLock`. Without a GPU the CPU pass is the whole evaluation (its
    GPU stages say ``skipped: no GPU``)."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        compile_slots: int | None = None,
        gpu_sandbox: Evaluator | None | bool = True,
        gpu_lock: GpuLock | None = None,
    ) -> None:
        self.cpu = Sandbox(config, gpu=False)
        self._lock_inside = False  # True: the sandbox itself holds the lock around its GPU stages only
        if gpu_sandbox is True:
            gpu = detect_gpu()
            self.lock = (gpu_lock or GpuLock(visible_gpu_id())) if gpu is not None else None
            self.gpu: Evaluator | None = None
            if gpu is not None and self.lock is not None:
                cfg = dataclasses.replace(config or SandboxConfig(), gpu_lock=self.lock.hold)
                self.gpu = Sandbox(cfg, gpu=gpu)
                self._lock_inside = True
        else:
            self.gpu = gpu_sandbox or None
            self.lock = (gpu_lock or GpuLock(visible_gpu_id())) if self.gpu is not None else None
        self.compile_slots = max(1, compile_slots or os.cpu_count() or 1)
        self._slots = threading.BoundedSemaphore(self.compile_slots)
        self._count_lock = threading.Lock()
        self._same_source: dict[str, threading.Lock] = {}
        self.cpu_evaluations = 0
        self.gpu_evaluations = 0

    def _source_lock(self, task: TaskSpec, source: str) -> threading.Lock:
        key = hashlib.sha256(f"{task.id}\0{task.gencode}\0{source}".encode()).hexdigest()
        with self._count_lock:
            return self._same_source.setdefault(key, threading.Lock())

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        # Identical candidates (samples of a deterministic model, a replay under several conditions) are
        # compiled once: the second waits and hits the compile cache instead of racing the first to fill it.
        with self._source_lock(task, source), self._slots:
            first = self.cpu.evaluate(task, source)
        with self._count_lock:
            self.cpu_evaluations += 1
        if self.gpu is None or self.lock is None or first.first_failure is not None:
            return first
        if self._lock_inside:
            report = self.gpu.evaluate(
                task, source
            )  # compile is cached; only the GPU stages wait for the lock
        else:
            with self.lock.hold():
                report = self.gpu.evaluate(task, source)
        with self._count_lock:
            self.gpu_evaluations += 1
        return report
