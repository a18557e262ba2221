"""Timing: candidate and baseline through the same bracket on rotated, poisoned buffer sets (worker.py);
the verdict: every repetition's outputs right, and no time below the roofline bound."""

from __future__ import annotations

import time
from typing import Any

from ptxrag.tasks.spec import TaskSpec

from .. import roofline
from ..results import TimingResult
from ..worker_client import WorkerDied, WorkerProcess


def run_timing(w: WorkerProcess, task: TaskSpec, gpu_name: str | None = None) -> TimingResult:
    t0 = time.monotonic()
    try:
        res = w.ask({"cmd": "timing"}, w.config.stage_limits.timing_s, "timing")
    except WorkerDied as e:
        return TimingResult(status="failed", message=str(e), wall_s=time.monotonic() - t0)
    wall = time.monotonic() - t0
    if not res.get("ok"):
        status = "error" if res.get("kind") == "harness" else "failed"
        return TimingResult(status=status, message=res.get("error", "timing failed"), wall_s=wall)  # type: ignore[arg-type]
    return judge_timing(task, res, wall, gpu_name)


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
        baseline_cached=bool(res.get("baseline_cached", False)),
        reps=res.get("reps", 0),
        speedup=speedup,
        implausible=implausible,
        roofline_ms=bound.seconds * 1e3 if bound is not None else None,
        recheck_passed=recheck_ok,
        wall_s=wall_s,
    )
