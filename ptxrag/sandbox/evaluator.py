"""The evaluator: compile -> static -> correctness -> execution -> mutation -> timing, stopping at the first
failure. Each GPU stage lives in ``stages/``; the worker process in ``worker_client.py``.

``Sandbox(...).evaluate(task, source)`` returns an EvaluationReport. Failures the candidate caused are
data in the report; a broken harness (missing toolchain, unreadable task) raises or reports ``error``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from ptxrag.tasks.spec import TaskSpec

from .compile import compile_candidate
from .config import SandboxConfig, StageLimits
from .results import (
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    MutationResult,
    StaticResult,
    TimingResult,
    skipped,
)
from .stages.correctness import run_correctness, verify_profiled
from .stages.execution import minimum_count, reference_counts, run_execution
from .stages.mutation import build_task_mutants, run_mutation
from .stages.timing import judge_timing, run_timing
from .static import forbidden_hits, static_check
from .toolchain import GpuInfo, detect_gpu
from .worker_client import WorkerProcess, worker_job

if TYPE_CHECKING:
    from .mutation import Mutant

__all__ = [
    "Sandbox",
    "SandboxConfig",
    "StageLimits",
    "judge_timing",
    "minimum_count",
    "reference_counts",
]

#: builds mutants (nvcc, ptxas: CPU work) while the GPU stages of the candidate run; one build per candidate in
#: flight up to a quarter of the cores (each build runs its mutants in parallel itself)
_MUTANT_POOL = ThreadPoolExecutor(
    max_workers=max(2, (os.cpu_count() or 2) // 4), thread_name_prefix="ptxrag-mutants"
)


def _close_workers(idle: list[WorkerProcess]) -> None:
    while idle:
        idle.pop().close()


class Sandbox:
    """Evaluates candidate kernels: locally, or through the sandbox service with ``Sandbox(url=...)``.

    The GPU worker (PyTorch, the CUDA context, the baseline's timings) is kept warm between evaluations when
    ``config.keep_worker`` is set (the default): each candidate still gets fresh candidate processes, fresh
    inputs and every check. ``close()`` (or ``with Sandbox() as sb:``) stops it; so does garbage collection.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        gpu: GpuInfo | None | bool = True,
        url: str | None = None,
        token: str | None = None,
    ) -> None:
        self.config = config or SandboxConfig()
        self._client = None
        if url is not None:
            from .service.client import ServiceClient

            self._client = ServiceClient(url, token=token)
            self._gpu = None
            return
        # gpu=True: detect; gpu=None/False: behave as if there were none; GpuInfo: trust the caller
        self._gpu = detect_gpu() if gpu is True else (gpu or None)
        self._idle: list[WorkerProcess] = []  # warm workers waiting for the next candidate
        self._idle_lock = threading.Lock()
        # the finalizer lives in weakref's registry; it stops the workers when the sandbox is collected
        weakref.finalize(self, _close_workers, self._idle)

    # -- the warm worker --------------------------------------------------------------------------------
    def _take_worker(self) -> WorkerProcess:
        with self._idle_lock:
            while self._idle:
                w = self._idle.pop()
                if w.reusable:
                    w.begin_job(self.config.artifacts_dir)
                    return w
                w.close()
        w = WorkerProcess(self.config)
        w.begin_job(self.config.artifacts_dir)
        return w

    def _release_worker(self, w: WorkerProcess) -> None:
        """Keep the worker for the next candidate when it is fit (its job's processes swept), else stop it."""
        if not self.config.keep_worker or not w.end_job():
            w.close()
            return
        with self._idle_lock:
            if len(self._idle) < self.config.idle_workers:
                self._idle.append(w)
                return
        w.close()

    def close(self) -> None:
        """Stop the warm GPU worker(s). The sandbox stays usable: the next evaluation starts a new one."""
        with self._idle_lock:
            _close_workers(self._idle)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def gpu(self) -> GpuInfo | None:
        return self._gpu

    # -- the pipeline ---------------------------------------------------------------------------------
    def evaluate(
        self, task: TaskSpec, source: str, on_stage: Callable[[str], None] | None = None
    ) -> EvaluationReport:
        """Run the stages; ``on_stage(name)`` is called as each stage starts (progress for UIs and services)."""
        if self._client is not None:
            return self._client.evaluate(task, source, run_timing=self.config.run_timing)
        stage = on_stage or (lambda _s: None)
        t0 = time.monotonic()
        sha = hashlib.sha256(source.encode()).hexdigest()
        stat: StaticResult = skipped("static", "compile did not pass")  # type: ignore[assignment]
        banned = forbidden_hits(source, None, task.forbidden)
        # a warm GPU worker, or a new one that imports torch and creates its CUDA context while we compile
        early = None if (banned or self._gpu_unavailable(task)) else self._take_worker()
        cpu = ExitStack()  # the compile and static stages hold the caller's CPU slot, if any
        try:
            if self.config.cpu_lock is not None:
                cpu.enter_context(self.config.cpu_lock())
            if banned:
                # judged before compiling: a forbidden header may not even exist here, and the verdict is the same
                comp = CompileResult(
                    status="skipped", message="not compiled: the source uses a forbidden library"
                )
                stat = StaticResult(
                    status="failed", message="forbidden: " + "; ".join(banned), forbidden_hits=banned
                )
            else:
                stage("compile")
                comp = compile_candidate(
                    source,
                    task.gencode,
                    timeout_s=self.config.stage_limits.compile_s,
                    use_cache=self.config.use_compile_cache,
                )
            corr: CorrectnessResult = skipped("correctness", "an earlier stage did not pass")  # type: ignore[assignment]
            exe: ExecutionResult = skipped("execution", "an earlier stage did not pass")  # type: ignore[assignment]
            tim: TimingResult = skipped("timing", "an earlier stage did not pass")  # type: ignore[assignment]
            mut: MutationResult = skipped("mutation", "an earlier stage did not pass")  # type: ignore[assignment]
            if comp.ok and comp.library_path:
                stage("static")
                stat = static_check(source, Path(comp.library_path), task.required_ptx, task.forbidden)
            cpu.close()
            if comp.ok and stat.ok and comp.library_path:
                gpu_why = self._gpu_unavailable(task)
                if gpu_why:
                    corr = skipped("correctness", gpu_why)  # type: ignore[assignment]
                    exe = skipped("execution", gpu_why)  # type: ignore[assignment]
                    tim = skipped("timing", gpu_why)  # type: ignore[assignment]
                    mut = skipped("mutation", gpu_why)  # type: ignore[assignment]
                else:
                    # mutants build on the CPU while the GPU checks the candidate itself
                    mutants = (
                        _MUTANT_POOL.submit(build_task_mutants, self.config, task, source)
                        if self.config.run_mutation
                        else None
                    )
                    corr, exe, mut, tim = self._gpu_stages(
                        task, Path(comp.library_path), early, stage, mutants
                    )
        finally:
            cpu.close()
            if early is not None:
                self._release_worker(early)
        success = (
            all(s.ok for s in (comp, stat, corr, exe))
            and mut.status in ("passed",)
            and tim.status != "failed"
        )
        return EvaluationReport(
            task_id=task.id,
            source_sha256=sha,
            arch=task.arch,
            success=success,
            compile=comp,
            static=stat,
            correctness=corr,
            execution=exe,
            mutation=mut,
            timing=tim,
            gpu=self._gpu.label if self._gpu else None,
            total_wall_s=time.monotonic() - t0,
        )

    def _gpu_unavailable(self, task: TaskSpec) -> str | None:
        if self._gpu is None:
            return "skipped: no GPU"
        if self._gpu.compute_capability != task.compute_capability:
            cc = task.compute_capability
            return (
                f"skipped: not runnable here ({task.arch} needs compute capability {cc[0]}.{cc[1]}, "
                f"this GPU is {self._gpu.label})"
            )
        return None

    # -- GPU stages -------------------------------------------------------------------------------------
    def _gpu_stages(
        self,
        task: TaskSpec,
        library: Path,
        worker: WorkerProcess | None = None,
        stage: Callable[[str], None] = lambda _s: None,
        mutants: Future[list[Mutant]] | None = None,
    ) -> tuple[CorrectnessResult, ExecutionResult, MutationResult, TimingResult]:
        own = worker is None
        w = worker or WorkerProcess(self.config)
        stage("correctness")
        work = w.work
        later = "correctness did not pass"
        try:
            lib = (
                w.harness / "candidate.so"
            )  # the parent's folder: the candidate's processes cannot replace it
            shutil.copy2(library, lib)
            ref = w.harness / "reference.py"
            shutil.copy2(task.path(task.reference.file), ref)
            for p in (lib, ref):
                p.chmod(0o644)
            job = worker_job(task, lib, ref, self._baseline_key(task))
            (w.harness / "job.json").write_text(json.dumps(job))
            with self._hold_gpu("shared"):
                corr = run_correctness(w, w.harness / "job.json")
            if not corr.ok:
                return corr, skipped("execution", later), skipped("mutation", later), skipped("timing", later)  # type: ignore[return-value]
            stage("execution")
            with self._hold_gpu("exclusive"):
                exe = run_execution(self.config, task, work, lambda d: verify_profiled(w, d))
            later = "execution check did not pass"
            if not exe.ok:
                return corr, exe, skipped("mutation", later), skipped("timing", later)  # type: ignore[return-value]
            if not self.config.run_mutation:
                mut = skipped("mutation", "mutation check disabled")  # type: ignore[assignment]
                if self.config.run_timing:
                    with self._hold_gpu("exclusive"):
                        tim = run_timing(w, task, self._gpu_label)
                else:
                    tim = skipped("timing", "timing disabled")  # type: ignore[assignment]
                return corr, exe, mut, tim  # type: ignore[return-value]
            stage("mutation")
            # each mutant runs in a fresh candidate process of this worker (its inputs and references
            # stay); one that hangs (an mbarrier that never completes) is cut off at a few times the
            # honest time
            with self._hold_gpu("shared"):
                mut = run_mutation(task, mutants, w, limit_s=max(10.0, 3.0 * corr.wall_s))
            if not mut.ok:
                return corr, exe, mut, skipped("timing", "mutation check did not pass")  # type: ignore[return-value]
            if not self.config.run_timing:
                return corr, exe, mut, skipped("timing", "timing disabled")  # type: ignore[return-value]
            stage("timing")
            with self._hold_gpu("exclusive"):
                tim = run_timing(w, task, self._gpu_label)
            return corr, exe, mut, tim
        finally:
            if own:
                w.close()

    @property
    def _gpu_label(self) -> str | None:
        return self._gpu.label if self._gpu else None

    def _hold_gpu(self, how: str) -> AbstractContextManager[None]:
        """The GPU for one stage: ``shared`` (checks) or ``exclusive`` (ncu, timing) under ``gpu_share``."""
        share = self.config.gpu_share
        if share is None:
            return nullcontext()
        return share.shared() if how == "shared" else share.exclusive()

    @staticmethod
    def _baseline_key(task: TaskSpec) -> str:
        """What the library's timing depends on: the reference file, its baseline function and the timing
        shape, dtypes and repetitions. Equal keys share one baseline measurement within a warm worker."""
        h = hashlib.sha256(task.path(task.reference.file).read_bytes())
        tensors = [(t.name, str(t.dtype), t.shape) for t in (*task.inputs, *task.outputs)]
        meta = [
            task.id,
            task.reference.baseline_function,
            task.shapes.timing,
            task.timing.model_dump(),
            tensors,
        ]
        h.update(json.dumps(meta, sort_keys=True, default=str).encode())
        return h.hexdigest()
