"""The evaluator: compile -> static -> correctness -> execution -> timing, stopping at the first failure.

``Sandbox(...).evaluate(task, source)`` returns an EvaluationReport. Failures the candidate caused are
data in the report; a broken harness (missing toolchain, unreadable task) raises or reports ``error``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptxrag.base.errors import SandboxFailure
from ptxrag.base.expr import evaluate
from ptxrag.tasks.spec import COUNTS_FILE, TaskSpec

from . import ncu as ncu_mod
from . import roofline
from .compile import compile_candidate
from .containment import Contained, Limits, clean_env, describe_exit, run_contained, tail
from .native import native_helpers
from .opcodes import resolve
from .results import (
    CheckResult,
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    MutantOutcome,
    MutationResult,
    StaticResult,
    TimingResult,
    skipped,
)
from .static import forbidden_hits, static_check
from .toolchain import GpuInfo, ToolchainError, detect_gpu, find_ncu

if TYPE_CHECKING:
    from .mutation import Mutant

GPU_DIR = Path(__file__).parent / "gpu"
#: builds mutants (nvcc, ptxas: CPU work) while the GPU stages of the candidate run
_MUTANT_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ptxrag-mutants")


@dataclass(frozen=True)
class StageLimits:
    compile_s: float = 180.0
    gpu_start_s: float = 90.0  # worker start: import torch, CUDA init, load the library
    correctness_s: float = 120.0
    execution_s: float = 180.0
    timing_s: float = 180.0


@dataclass
class SandboxConfig:
    """One typed config for the evaluator. Environment values: PTXRAG_RUNNER_PYTHON, PTXRAG_NO_GPU."""

    runner_python: str = field(default_factory=lambda: os.environ.get("PTXRAG_RUNNER_PYTHON", sys.executable))
    #: PTXRAG_ISOLATE=1: dedicated uid + empty network namespace for candidate processes (when root)
    limits: Limits = field(
        default_factory=lambda: Limits.isolated() if os.environ.get("PTXRAG_ISOLATE") == "1" else Limits()
    )
    stage_limits: StageLimits = field(default_factory=StageLimits)
    use_compile_cache: bool = True
    run_timing: bool = True
    #: False: skip the mutation stage (a report then never says success; for debugging the other stages)
    run_mutation: bool = True
    keep_workdir: bool = False
    artifacts_dir: Path | None = None  # copy ncu CSV, SASS excerpt and logs here when set
    cuda_device: str | None = (
        None  # CUDA_VISIBLE_DEVICES for the GPU children (a service pins one GPU per job)
    )
    #: held around the GPU stages (correct timings and ncu need the GPU alone); the service passes a per-GPU lock
    gpu_lock: Callable[[], AbstractContextManager[Any]] | None = None


class Sandbox:
    """Evaluates candidate kernels: locally, or through the sandbox service with ``Sandbox(url=...)``."""

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
        # the GPU worker imports torch and creates its CUDA context (seconds) while we compile
        early = None if (banned or self._gpu_unavailable(task)) else _Worker(self.config)
        try:
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
                        _MUTANT_POOL.submit(self._build_mutants, task, source)
                        if self.config.run_mutation
                        else None
                    )
                    with (self.config.gpu_lock or nullcontext)():
                        corr, exe, mut, tim = self._gpu_stages(
                            task, Path(comp.library_path), early, stage, mutants
                        )
        finally:
            if early is not None:
                early.close()
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
        worker: _Worker | None = None,
        stage: Callable[[str], None] = lambda _s: None,
        mutants: Future[list[Mutant]] | None = None,
    ) -> tuple[CorrectnessResult, ExecutionResult, MutationResult, TimingResult]:
        w = worker or _Worker(self.config)
        stage("correctness")
        work = w.work
        later = "correctness did not pass"
        try:
            lib = work / "candidate.so"
            shutil.copy2(library, lib)
            ref = work / "reference.py"
            shutil.copy2(task.path(task.reference.file), ref)
            for p in (lib, ref):
                p.chmod(0o644)
            job = _job(task, lib, ref)
            (work / "job.json").write_text(json.dumps(job))
            corr = w.correctness(work / "job.json")
            if not corr.ok:
                return corr, skipped("execution", later), skipped("mutation", later), skipped("timing", later)  # type: ignore[return-value]
            stage("execution")
            exe = self._execution(task, work, w.verify_profiled)
            later = "execution check did not pass"
            if not exe.ok:
                return corr, exe, skipped("mutation", later), skipped("timing", later)  # type: ignore[return-value]
            if not self.config.run_mutation:
                mut = skipped("mutation", "mutation check disabled")  # type: ignore[assignment]
                tim = (
                    w.timing(task, self._gpu.label if self._gpu else None)
                    if self.config.run_timing
                    else skipped("timing", "timing disabled")
                )
                return corr, exe, mut, tim  # type: ignore[return-value]
            stage("mutation")
            # each mutant runs in a fresh candidate process of this worker (its inputs and references
            # stay); one that hangs (an mbarrier that never completes) is cut off at a few times the
            # honest time
            mut = self._mutation(task, mutants, w, limit_s=max(4.0, 3.0 * corr.wall_s))
            if not mut.ok:
                return corr, exe, mut, skipped("timing", "mutation check did not pass")  # type: ignore[return-value]
            if not self.config.run_timing:
                return corr, exe, mut, skipped("timing", "timing disabled")  # type: ignore[return-value]
            stage("timing")
            tim = w.timing(task, self._gpu.label if self._gpu else None)
            return corr, exe, mut, tim
        finally:
            w.close()

    def _build_mutants(self, task: TaskSpec, source: str) -> list[Mutant]:
        from .mutation import build_mutants

        return build_mutants(
            source, task.gencode, task.required_ptx, timeout_s=self.config.stage_limits.compile_s
        )

    def _mutation(
        self, task: TaskSpec, mutants: Future[list[Mutant]] | None, worker: _Worker, limit_s: float
    ) -> MutationResult:
        """Each required instruction's effect removed: the correctness check must then fail (or the kernel
        fault or hang), else the instruction executed without its result mattering."""
        t0 = time.monotonic()
        if mutants is None:
            return MutationResult(status="error", message="no mutants were built (harness)")
        try:
            built = mutants.result(timeout=self.config.stage_limits.compile_s * 2)
        except Exception as e:  # noqa: BLE001 - the mutant build is harness work
            return MutationResult(status="error", message=f"building mutants failed: {type(e).__name__}: {e}")
        outcomes: list[MutantOutcome] = []
        for m in built:
            if m.status == "not_mutable":
                outcomes.append(
                    MutantOutcome(ptx=m.instruction, status="not mutable", how=m.how, detail=m.message)
                )
                continue
            if m.status != "built" or not m.library_path:
                outcomes.append(
                    MutantOutcome(ptx=m.instruction, status="not built", how=m.how, detail=m.message)
                )
                continue
            status, detail = worker.mutant(Path(m.library_path), len(outcomes), limit_s)
            outcomes.append(MutantOutcome(ptx=m.instruction, status=status, how=m.how, detail=detail[:300]))  # type: ignore[arg-type]
        unchanged = [o for o in outcomes if o.status == "output unchanged"]
        tested = [o for o in outcomes if o.status in ("output changed", "output unchanged")]
        wall = time.monotonic() - t0
        if unchanged:
            names = ", ".join(f"{o.ptx} ({o.how})" for o in unchanged)
            return MutationResult(
                status="failed",
                message=f"the result does not depend on {names}: with it removed every check still passes, "
                "so it executes without doing the task's work; compute the output with it",
                mutants=outcomes,
                wall_s=wall,
            )
        rest = [o for o in outcomes if o not in tested]
        msg = f"{len(tested)} mutant(s) changed the output: " + ", ".join(o.ptx for o in tested)
        if rest:
            msg += "; not mutated: " + ", ".join(f"{o.ptx} ({o.status}: {o.detail})" for o in rest)
        if not tested:
            msg = "no required instruction could be mutated: " + ", ".join(
                f"{o.ptx} ({o.detail})" for o in rest
            )
        return MutationResult(status="passed", message=msg, mutants=outcomes, wall_s=wall)

    def _execution(
        self, task: TaskSpec, work: Path, verify_profiled: Callable[[Path], list[CheckResult]] | None = None
    ) -> ExecutionResult:
        t0 = time.monotonic()
        ncu = find_ncu()
        if ncu is None:
            return ExecutionResult(status="error", message="ncu (Nsight Compute) not found; set PTXRAG_NCU")
        launch_job = work / "inputs" / "launch.json"
        if not launch_job.is_file():
            return ExecutionResult(
                status="error", message="correctness stage saved no inputs for the ncu launch"
            )
        csv_path = work / "ncu.csv"
        cmd = [
            *ncu_mod.ncu_command(str(ncu)),
            "--log-file", str(csv_path),
            self.config.runner_python, str(work / "launch_once.py"), str(launch_job),
        ]  # fmt: skip
        rc, tracked = run_contained(
            cmd,
            cwd=work,
            env=_child_env(self.config, work),
            limits=self.config.limits,
            timeout_s=self.config.stage_limits.execution_s,
            stdout_path=work / "ncu.log",
            # the GPU worker runs as the same uid and still has the timing stage to do: its close sweeps the uid
            sweep_uid=False,
        )
        shown = ["ncu", *cmd[1:-3], "launch_once.py", "launch.json"]
        wall = time.monotonic() - t0
        if tracked.killed_reason:
            return ExecutionResult(
                status="failed",
                message=f"profiled launch {tracked.killed_reason}",
                ncu_command=shown,
                wall_s=wall,
            )
        text = csv_path.read_text(errors="replace") if csv_path.is_file() else ""
        if rc != 0:
            return ExecutionResult(
                status="failed",
                message=f"the profiled launch {describe_exit(rc)}: {tail(work / 'ncu.log', 600).strip()}",
                ncu_command=shown,
                wall_s=wall,
            )
        try:
            kernels = ncu_mod.parse_source_csv(text or (work / "ncu.log").read_text(errors="replace"))
        except ncu_mod.NcuParseError as e:
            return ExecutionResult(status="error", message=str(e), ncu_command=shown, wall_s=wall)
        if not kernels:
            return ExecutionResult(
                status="failed",
                message="Nsight Compute profiled no kernel: ptxrag_launch launched nothing on the GPU",
                ncu_command=shown,
                wall_s=wall,
            )
        results = [ncu_mod.execution_counts(kernels, resolve(p)) for p in task.required_ptx]
        results = [r.model_copy(update={"min_required": minimum_count(task, r.ptx)}) for r in results]
        ok = all(r.executed and r.predicated_on_thread_instructions >= (r.min_required or 1) for r in results)
        msg = "; ".join(ncu_mod.explain(r) for r in results)
        verified = verify_profiled(work) if verify_profiled is not None else None
        if verified is not None:
            bad = [c for c in verified if not c.passed]
            if bad:
                ok = False
                msg = (
                    "the profiled call's outputs were wrong, so its instruction counts do not count: "
                    + _describe_bad(bad[0])
                )
        return ExecutionResult(
            status="passed" if ok else "failed",
            message=msg,
            instructions=results,
            kernels_profiled=sorted({k.name for k in kernels}),
            ncu_command=shown,
            ncu_csv_path=(
                str(self.config.artifacts_dir / "ncu.csv")
                if self.config.artifacts_dir
                else (str(csv_path) if self.config.keep_workdir else None)
            ),
            wall_s=wall,
        )


def _child_env(config: SandboxConfig, work: Path) -> dict[str, str]:
    env = clean_env(work)
    if config.cuda_device is not None:
        env["CUDA_VISIBLE_DEVICES"] = config.cuda_device
    return env


def _job(task: TaskSpec, lib: Path, reference: Path) -> dict[str, Any]:
    """The GPU worker's job: plain JSON, so the worker needs nothing but torch."""
    return {
        "library": str(lib),
        "reference_file": str(reference),
        "reference_function": task.reference.function,
        "baseline_function": task.reference.baseline_function,
        "precision": task.reference.precision,
        "inputs": [t.model_dump() for t in task.inputs],
        "outputs": [t.model_dump() for t in task.outputs],
        "scalars": [s.model_dump() for s in task.scalars],
        "check_dims": task.shapes.check,
        "awkward": task.shapes.awkward,
        "timing_dims": task.shapes.timing,
        "tolerance": task.tolerance.model_dump(),
        "timing": task.timing.model_dump(),
        "workspace_bytes": task.workspace_bytes,
    }


class _WorkerDied(RuntimeError):
    pass


class _Worker:
    """The contained GPU worker process (worker.py), its fresh working directory and its line protocol."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.work = work = Path(tempfile.mkdtemp(prefix="ptxrag-eval-"))
        # the child reads nothing outside its directory but its interpreter (an isolated uid may see no more)
        for name in ("worker.py", "runner.py", "launch_once.py", "abi.py"):
            shutil.copy2(GPU_DIR / name, work / name)
        self.start_error: str | None = None
        try:
            helpers = native_helpers()  # the candidate process's rtld audit and CUPTI stream monitor
            shutil.copy2(helpers.audit, work / "audit.so")
            shutil.copy2(helpers.monitor, work / "monitor.so")
        except (SandboxFailure, ToolchainError, OSError) as e:
            self.start_error = f"harness error: the candidate process's run-time checks are unavailable: {e}"
        self.log = work / "worker.log"
        self._t_start = time.monotonic()
        self._ready = False
        self._closed = False
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.c = Contained(
            [config.runner_python, str(work / "worker.py"), str(cmd_r), str(res_w)],
            cwd=work,
            env=_child_env(config, work),
            limits=config.limits,
            stdout_path=self.log,
            pass_fds=(cmd_r, res_w),
        )
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""

    def _wait_ready(self) -> None:
        if self._ready or self.start_error:
            return
        left = self.config.stage_limits.gpu_start_s - (time.monotonic() - self._t_start)
        try:
            hello = self._read(max(left, 1.0), "starting the GPU worker")
            if not hello.get("ok"):
                self.start_error = hello.get("error", "worker failed to start")
            self._ready = True
        except _WorkerDied as e:
            self.start_error = str(e)

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker (and everything it started) and delete its directory, unless kept."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            os.write(self.cmd_w, b'{"cmd": "exit"}\n')
        for fd in (self.cmd_w, self.res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.c.close()
        if self.config.artifacts_dir is not None:
            dest = self.config.artifacts_dir
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("ncu.csv", "worker.log", "ncu.log"):
                if (self.work / name).is_file():
                    shutil.copy2(self.work / name, dest / name)
        if not self.config.keep_workdir:
            shutil.rmtree(self.work, ignore_errors=True)

    def _read(self, timeout_s: float, doing: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.c.kill(f"did not finish {doing} within {timeout_s:.0f} s (a kernel that never ends?)")
                raise _WorkerDied(self._death())
            r, _, _ = select.select([self.res_r], [], [], min(left, 0.5))
            if not r:
                if self.c.proc.poll() is not None or self.c.tracked.killed_reason:
                    raise _WorkerDied(self._death())
                continue
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise _WorkerDied(self._death())
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _death(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.c.proc.wait(timeout=5)
        why = self.c.tracked.killed_reason or describe_exit(self.c.proc.returncode)
        out = tail(self.log, 600).strip()
        return f"the candidate process {why}" + (f"; its output ends with: {out}" if out else "")

    def _ask(self, cmd: dict[str, Any], timeout_s: float, doing: str) -> dict[str, Any]:
        self._wait_ready()
        if self.start_error:
            raise _WorkerDied(self.start_error)
        try:
            os.write(self.cmd_w, (json.dumps(cmd) + "\n").encode())
        except OSError as e:  # EPIPE: the worker is gone (killed, or it exited by itself)
            raise _WorkerDied(self._death()) from e
        return self._read(timeout_s, doing)

    def correctness(self, job: Path, limit_s: float | None = None) -> CorrectnessResult:
        t0 = time.monotonic()
        try:
            loaded = self._ask(
                {"cmd": "load", "job": str(job)}, self.config.stage_limits.gpu_start_s, "loading"
            )
            if not loaded.get("ok"):
                kind = loaded.get("kind")
                return CorrectnessResult(
                    status="error" if kind == "harness" else "failed",
                    message=f"could not load the candidate: {loaded.get('error', 'unknown error')}",
                    stdout_tail=tail(self.log, 800),
                    wall_s=time.monotonic() - t0,
                )
            res = self._ask(
                {"cmd": "correctness", "save_inputs": str(self.work / "inputs")},
                limit_s or self.config.stage_limits.correctness_s,
                "the correctness checks",
            )
        except _WorkerDied as e:
            status = "error" if str(e).startswith("harness error") else "failed"
            return CorrectnessResult(status=status, message=str(e), wall_s=time.monotonic() - t0)  # type: ignore[arg-type]
        wall = time.monotonic() - t0
        out_tail = tail(self.log, 800)
        if not res.get("ok"):
            kind = res.get("kind")
            status = "error" if kind == "harness" else "failed"
            prefix = {
                "load": "could not load the candidate: ",
                "cuda": "CUDA error: ",
                "harness": "harness error: ",
            }
            return CorrectnessResult(
                status=status,  # type: ignore[arg-type]
                message=prefix.get(kind or "", "") + res.get("error", "unknown error"),
                stdout_tail=out_tail,
                wall_s=wall,
            )
        checks = [CheckResult(**{k: v for k, v in c.items() if k != "seed"}) for c in res["checks"]]
        bad = [c for c in checks if not c.passed]
        if not bad:
            msg = f"all {len(checks)} checks passed (fresh random inputs, outputs poisoned with NaN)"
            return CorrectnessResult(
                status="passed", message=msg, checks=checks, stdout_tail=out_tail, wall_s=wall
            )
        return CorrectnessResult(
            status="failed", message=_describe_bad(bad[0]), checks=checks, stdout_tail=out_tail, wall_s=wall
        )

    def mutant(self, library: Path, tag: int, limit_s: float) -> tuple[str, str]:
        """A mutant's correctness checks in a fresh candidate process of this (loaded) worker:
        ("output changed" | "output unchanged" | "not built", detail)."""
        lib = self.work / f"mutant-{tag}.so"
        shutil.copy2(library, lib)
        lib.chmod(0o644)
        try:
            res = self._ask(
                {"cmd": "mutant", "library": str(lib), "tag": tag, "limit_s": limit_s},
                limit_s + self.config.stage_limits.gpu_start_s,
                "a mutant's checks",
            )
        except _WorkerDied as e:
            return "not built", f"the worker stopped during the mutant: {e}"
        finally:
            lib.unlink(missing_ok=True)
        if not res.get("ok"):
            return "not built", f"harness: {res.get('error', '?')}"
        outcome = res.get("outcome")
        if outcome == "not loaded":
            return "not built", f"the mutant did not load: {res.get('error', '')}"
        if outcome != "checks":
            return "output changed", f"the mutant {outcome}: {res.get('error', '')}"
        checks = [CheckResult(**{k: v for k, v in c.items() if k != "seed"}) for c in res["checks"]]
        bad = [c for c in checks if not c.passed]
        if not bad:
            return "output unchanged", "every check still passed without it"
        return "output changed", _describe_bad(bad[0])

    def verify_profiled(self, work: Path) -> list[CheckResult]:
        """Compare the outputs the profiled launch saved with the reference of its inputs."""
        try:
            res = self._ask(
                {"cmd": "verify_profiled", "dir": str(work / "inputs")},
                self.config.stage_limits.correctness_s,
                "checking the profiled call's outputs",
            )
        except _WorkerDied as e:
            return [CheckResult(label="profiled launch", dims={}, passed=False, error=str(e))]
        if not res.get("ok"):
            return [CheckResult(label="profiled launch", dims={}, passed=False, error=res.get("error", "?"))]
        return [CheckResult(**{k: v for k, v in c.items() if k != "seed"}) for c in res["checks"]]

    def timing(self, task: TaskSpec, gpu_name: str | None = None) -> TimingResult:
        t0 = time.monotonic()
        try:
            res = self._ask({"cmd": "timing"}, self.config.stage_limits.timing_s, "timing")
        except _WorkerDied as e:
            return TimingResult(status="failed", message=str(e), wall_s=time.monotonic() - t0)
        wall = time.monotonic() - t0
        if not res.get("ok"):
            status = "error" if res.get("kind") == "harness" else "failed"
            return TimingResult(status=status, message=res.get("error", "timing failed"), wall_s=wall)  # type: ignore[arg-type]
        return judge_timing(task, res, wall, gpu_name)


def _describe_bad(c: CheckResult) -> str:
    where = f"{c.label} {c.dims}, output {c.output}"
    if c.error:
        return f"{where}: {c.error}"
    if c.unwritten:
        return (
            f"{where}: {c.unwritten} of {c.numel} elements were never written (still NaN poison), "
            f"first bad element at index {c.worst_index}"
        )
    return (
        f"{where}: {c.mismatches} of {c.numel} elements wrong; worst at index {c.worst_index}: got {c.worst_value}, "
        f"expected {c.expected_value} (max abs error {c.max_abs_err:.3g})"
    )


def minimum_count(task: TaskSpec, ptx: str) -> int | None:
    """The predicated-on count one profiled call (at the first check shape) must reach, if the task sets one:
    its own expression, else a fraction of the reference solution's recorded count."""
    expr = task.execution.min_counts.get(ptx)
    if expr is not None:
        return max(1, math.ceil(evaluate(expr, task.shapes.check[0])))
    recorded = reference_counts(task)
    if recorded and ptx in recorded:
        return max(1, math.ceil(task.execution.min_fraction_of_reference * recorded[ptx]))
    return None


def reference_counts(task: TaskSpec) -> dict[str, int] | None:
    """The reference solution's predicated-on counts at the first check shape (``tasks validate --record-counts``)."""
    path = task.path(COUNTS_FILE)
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    if doc.get("dims") != task.shapes.check[0]:
        return None  # recorded for another shape: stale
    return {k: int(v) for k, v in doc.get("counts", {}).items()}


def judge_timing(
    task: TaskSpec, res: dict[str, Any], wall_s: float, gpu_name: str | None = None
) -> TimingResult:
    """Turn raw timings into a verdict: skipped or reused work, times below the roofline."""
    cand = res["candidate_median_ms"]
    cand_sync = res["candidate_device_sync_median_ms"]
    base = res.get("baseline_median_ms")
    base_sync = res.get("baseline_device_sync_median_ms")
    # work off args->stream and work left running are failed by the candidate process's CUPTI record at
    # every call (worker.py, runner.py); the device-synchronised times are kept as information
    rechecks = res.get("recheck", [])
    recheck_ok = all(r.get("passed") for r in rechecks)
    t_cand = cand
    t_base = base
    speedup = (t_base / t_cand) if (t_base is not None and t_cand > 0) else None
    dims = res["dims"]
    bound = None
    if task.timing.roofline:
        tensors: list[tuple[list[int | str], str]] = [
            (t.shape, str(t.dtype)) for t in (*task.inputs, *task.outputs)
        ]
        bound = roofline.lower_bound(
            gpu_name or res.get("gpu") or "",
            dims,
            tensors,
            bytes_expr=task.timing.bytes,
            flops_expr=task.timing.flops,
            flops_type=task.timing.flops_type,
        )
    below_roofline = bound is not None and t_cand < bound.seconds * 1e3
    cap = task.timing.max_plausible_speedup
    implausible = below_roofline or (cap is not None and speedup is not None and speedup > cap)
    msgs = []
    status = "passed"
    if not recheck_ok:
        status = "failed"
        first = next(r for r in rechecks if not r.get("passed"))
        detail = first.get("error") or (
            f"{first.get('label', 'a timed repetition')}: {first.get('mismatches', '?')} of "
            f"{first.get('numel', '?')} elements wrong"
        )
        msgs.append(
            f"outputs of the timed repetitions were wrong ({detail}): every call must do the whole work"
        )
    if speedup is not None:
        msgs.insert(0, f"candidate {t_cand:.3f} ms vs baseline {t_base:.3f} ms: speedup {speedup:.2f}x")
    else:
        msgs.insert(0, f"candidate {t_cand:.3f} ms (no baseline)")
    if below_roofline and bound is not None:
        status = "failed"
        msgs.append(
            f"faster than the hardware allows: {t_cand:.4f} ms is below the roofline bound "
            f"{bound.seconds * 1e3:.4f} ms ({bound.explain}); the work was not done in the timed call"
        )
    elif implausible:
        status = "failed"
        msgs.append(f"speedup above the task's ceiling of {cap:g}x")
    if bound is None and task.timing.roofline:
        msgs.append("no roofline bound for this GPU (peaks unknown)")
    return TimingResult(
        status=status,  # type: ignore[arg-type]
        message="; ".join(msgs),
        dims=dims,
        candidate_median_ms=cand,
        baseline_median_ms=base,
        candidate_device_sync_median_ms=cand_sync,
        baseline_device_sync_median_ms=base_sync,
        reps=res.get("reps", 0),
        speedup=speedup,
        implausible=implausible,
        roofline_ms=bound.seconds * 1e3 if bound is not None else None,
        recheck_passed=recheck_ok,
        wall_s=wall_s,
    )
