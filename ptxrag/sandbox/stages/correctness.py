"""Correctness: fresh random inputs per check shape, outputs poisoned, inputs and guards verified; the
reference computed from private copies (worker.py). Also the check of the profiled launch's outputs."""

from __future__ import annotations

import time
from pathlib import Path

from ..results import CheckResult, CorrectnessResult
from ..worker_client import WorkerDied, WorkerProcess


def run_correctness(w: WorkerProcess, job: Path, limit_s: float | None = None) -> CorrectnessResult:
    t0 = time.monotonic()
    try:
        loaded = w.ask({"cmd": "load", "job": str(job)}, w.config.stage_limits.gpu_start_s, "loading")
        if not loaded.get("ok"):
            kind = loaded.get("kind")
            return CorrectnessResult(
                status="error" if kind == "harness" else "failed",
                message=f"could not load the candidate: {loaded.get('error', 'unknown error')}",
                stdout_tail=w.log_tail(800),
                wall_s=time.monotonic() - t0,
            )
        res = w.ask(
            {"cmd": "correctness", "save_inputs": str(w.work / "inputs")},
            limit_s or w.config.stage_limits.correctness_s,
            "the correctness checks",
        )
    except WorkerDied as e:
        status = "error" if str(e).startswith("harness error") else "failed"
        return CorrectnessResult(status=status, message=str(e), wall_s=time.monotonic() - t0)  # type: ignore[arg-type]
    wall = time.monotonic() - t0
    out_tail = w.log_tail(800)
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
        status="failed", message=describe_bad(bad[0]), checks=checks, stdout_tail=out_tail, wall_s=wall
    )


def verify_profiled(w: WorkerProcess, work: Path) -> list[CheckResult]:
    """Compare the outputs the profiled launch saved with the reference of its inputs."""
    try:
        res = w.ask(
            {"cmd": "verify_profiled", "dir": str(work / "inputs")},
            w.config.stage_limits.correctness_s,
            "checking the profiled call's outputs",
        )
    except WorkerDied as e:
        return [CheckResult(label="profiled launch", dims={}, passed=False, error=str(e))]
    if not res.get("ok"):
        return [CheckResult(label="profiled launch", dims={}, passed=False, error=res.get("error", "?"))]
    return [CheckResult(**{k: v for k, v in c.items() if k != "seed"}) for c in res["checks"]]


def describe_bad(c: CheckResult) -> str:
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
