"""The parent's side of the GPU worker: its contained process, working directory and line protocol
(``gpu/protocol.py`` types the commands). The stages (``stages/``) ask it for their checks."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ptxrag.base.errors import SandboxFailure
from ptxrag.tasks.spec import TaskSpec

from .config import SandboxConfig
from .containment import PARENT_OWNED_DIR, Contained, clean_env, describe_exit
from .gpu import protocol
from .native import native_helpers
from .toolchain import ToolchainError

GPU_DIR = Path(__file__).parent / "gpu"
#: the files the worker runs by path in its directory (standard library and torch only)
WORKER_FILES = ("worker.py", "runner.py", "launch_once.py", "abi.py", "protocol.py", "nospawn.py")
#: the folder of the worker's directory holding what the harness runs or trusts: the worker's scripts, the rtld
#: audit and CUPTI libraries, each job's job.json, reference, candidate and mutant libraries. It stays the
#: parent's (``containment.prepare_workdir`` hands the rest to a sandbox uid), so the candidate's processes
#: can read it but not write it: before, a candidate could rewrite runner.py or audit.so for every later
#: candidate process (mutants, the next jobs of a warm worker), launch_once.py for the ncu launch, the
#: reference before the worker imported it, or a mutant library before it ran
HARNESS_DIR = PARENT_OWNED_DIR


def child_env(config: SandboxConfig, work: Path) -> dict[str, str]:
    env = clean_env(work)
    if config.cuda_device is not None:
        env["CUDA_VISIBLE_DEVICES"] = config.cuda_device
    if config.forbid_process_creation:
        env["PTXRAG_SANDBOX_NO_SPAWN"] = "1"  # read by the worker (gpu/worker.py NO_SPAWN)
    return env


def worker_job(task: TaskSpec, lib: Path, reference: Path, baseline_key: str | None = None) -> dict[str, Any]:
    """The GPU worker's job: plain JSON, so the worker needs nothing but torch. ``baseline_key``: jobs with
    the same key reuse the baseline timing a warm worker measured for an earlier one."""
    return {
        "baseline_key": baseline_key,
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


class WorkerDied(SandboxFailure):
    """The worker process is gone (killed at a deadline, or it exited). The stages catch it and report the
    stage as failed with the reason; it never reaches a caller of the evaluator."""


class WorkerProcess:
    """The contained GPU worker process (worker.py), its fresh working directory and its line protocol."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        #: where the current job's ncu files and log go: the job's own folder (a warm worker serves jobs whose
        #: artifacts go to different folders, e.g. the service's)
        self.artifacts_dir = config.artifacts_dir
        self.work = work = Path(tempfile.mkdtemp(prefix="ptxrag-eval-"))
        self.harness = harness = work / HARNESS_DIR
        harness.mkdir()
        harness.chmod(0o755)
        # the child reads nothing outside its directory but its interpreter (an isolated uid may see no more)
        for name in WORKER_FILES:
            shutil.copy2(GPU_DIR / name, harness / name)
        self.start_error: str | None = None
        try:
            helpers = native_helpers()  # the candidate process's rtld audit and CUPTI stream monitor
            shutil.copy2(helpers.audit, harness / "audit.so")
            shutil.copy2(helpers.monitor, harness / "monitor.so")
        except (SandboxFailure, ToolchainError, OSError) as e:
            self.start_error = f"harness error: the candidate process's run-time checks are unavailable: {e}"
        self.log = work / "worker.log"
        self._log_from = 0  # where the current job's output starts in the log (a warm worker has had others)
        self.jobs = 0  # jobs started on this worker
        self._t_start = time.monotonic()
        self._ready = False
        self._closed = False
        self._broken = False  # a job saw it die or fail in a way that makes it unfit for the next
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.c = Contained(
            [config.runner_python, str(harness / "worker.py"), str(cmd_r), str(res_w)],
            cwd=work,
            env=child_env(config, work),
            limits=config.limits,
            stdout_path=self.log,
            pass_fds=(cmd_r, res_w),
            # what a candidate process leaves behind stays in the worker's tree, so the sweep between jobs
            # finds it also without a sandbox uid (tests/test_containment.py, the orphan case)
            subreaper=True,
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
        except WorkerDied as e:
            self.start_error = str(e)

    @property
    def reusable(self) -> bool:
        """Alive, started, and nothing in the last job left it unfit (a warm worker takes the next job)."""
        return (
            not self._closed
            and not self._broken
            and self.start_error is None
            and self.c.proc.poll() is None
            and self.c.tracked.killed_reason is None
        )

    def begin_job(self, artifacts_dir: Path | None = None) -> None:
        """Mark where this job's candidate output starts in the shared log; its artifacts go to
        ``artifacts_dir`` (none: not kept)."""
        self.jobs += 1
        self.artifacts_dir = artifacts_dir
        with contextlib.suppress(OSError):
            self._log_from = self.log.stat().st_size

    def log_tail(self, max_chars: int = 2000) -> str:
        """The end of the current job's output (the candidate's stdout and stderr)."""
        try:
            with self.log.open("rb") as f:
                f.seek(self._log_from)
                data = f.read()
        except OSError:
            return ""
        text = data[-max_chars:].decode(errors="replace")
        return ("..." if len(data) > max_chars else "") + text

    def end_job(self, spares: int = 1) -> bool:
        """Finish a job and keep the worker for the next: its candidate processes are closed, everything they
        started is swept (the worker itself stays), the job's files go, fresh spares start. False (and the
        worker closed) when it cannot be kept."""
        self._copy_artifacts()
        if not self.reusable:
            self.close()
            return False
        try:
            res = self.ask({"cmd": "reset"}, 30.0, "ending the job")
            if res.get("ok"):
                self.c.sweep()
                res = self.ask({"cmd": "spawn", "n": spares}, 30.0, "starting a spare")
        except WorkerDied:
            res = {"ok": False}
        if not res.get("ok") or not self.reusable:
            self.close()
            return False
        keep = {HARNESS_DIR, self.log.name}
        for p in self.harness.iterdir():  # the job's files (candidate, reference, mutants)
            if p.name not in {*WORKER_FILES, "audit.so", "monitor.so"}:
                p.unlink(missing_ok=True)
        for p in self.work.iterdir():
            if p.name not in keep and not p.name.startswith("audit-runner-"):
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        return True

    def _copy_artifacts(self) -> None:
        if self.artifacts_dir is not None:
            dest = self.artifacts_dir
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("ncu.csv", "ncu.log"):
                if (self.work / name).is_file():
                    shutil.copy2(self.work / name, dest / name)
            (dest / "worker.log").write_text(self.log_tail(1 << 20))

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker (and everything it started) and delete its directory, unless kept."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            os.write(self.cmd_w, protocol.encode({"cmd": "exit"}))
        for fd in (self.cmd_w, self.res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.c.close()
        self._copy_artifacts()
        if not self.config.keep_workdir:
            shutil.rmtree(self.work, ignore_errors=True)

    def _read(self, timeout_s: float, doing: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.c.kill(f"did not finish {doing} within {timeout_s:.0f} s (a kernel that never ends?)")
                raise WorkerDied(self._death())
            r, _, _ = select.select([self.res_r], [], [], min(left, 0.5))
            if not r:
                if self.c.proc.poll() is not None or self.c.tracked.killed_reason:
                    raise WorkerDied(self._death())
                continue
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise WorkerDied(self._death())
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError as e:
            # the result pipe carries only the worker's own replies; a line that is not one means the
            # protocol is out of step, so this worker takes no further job
            self._broken = True
            raise WorkerDied(f"the GPU worker sent an unreadable reply while {doing}: {line[:200]!r}") from e
        if not isinstance(reply, dict):
            self._broken = True
            raise WorkerDied(f"the GPU worker sent a reply that is not an object while {doing}")
        return reply

    def _death(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.c.proc.wait(timeout=5)
        why = self.c.tracked.killed_reason or describe_exit(self.c.proc.returncode)
        out = self.log_tail(600).strip()
        return f"the GPU worker {why}" + (f"; its output ends with: {out}" if out else "")

    def ask(self, cmd: protocol.Command, timeout_s: float, doing: str) -> dict[str, Any]:
        self._wait_ready()
        if self.start_error:
            raise WorkerDied(self.start_error)
        try:
            os.write(self.cmd_w, protocol.encode(cmd))
        except OSError as e:  # EPIPE: the worker is gone (killed, or it exited by itself)
            raise WorkerDied(self._death()) from e
        return self._read(timeout_s, doing)
