"""Execution: the candidate relaunched once under Nsight Compute (``gpu/launch_once.py``) on the first
check's inputs; each required instruction's predicated-on count must reach its minimum, and the profiled
call's outputs must be right."""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from ptxrag.base.expr import evaluate
from ptxrag.tasks.spec import COUNTS_FILE, TaskSpec

from .. import ncu as ncu_mod
from ..config import SandboxConfig
from ..containment import describe_exit, run_contained, tail
from ..opcodes import resolve
from ..results import CheckResult, ExecutionResult
from ..toolchain import find_ncu
from ..worker_client import HARNESS_DIR, child_env
from .correctness import describe_bad

#: how long Nsight Compute may go on after the candidate's launch has ended (writing its report takes well
#: under a second on the H200); longer means processes the candidate left behind keep it waiting
LAUNCHER_GRACE_S = 15.0


def run_execution(
    config: SandboxConfig,
    task: TaskSpec,
    work: Path,
    verify_profiled: Callable[[Path], list[CheckResult]] | None = None,
) -> ExecutionResult:
    t0 = time.monotonic()
    ncu = find_ncu()
    if ncu is None:
        return ExecutionResult(status="error", message="ncu (Nsight Compute) not found; set PTXRAG_NCU")
    launch_job = work / "inputs" / "launch.json"
    if not launch_job.is_file():
        return ExecutionResult(status="error", message="correctness stage saved no inputs for the ncu launch")
    csv_path = work / "ncu.csv"
    # the library and the number of unprofiled calls before the profiled one (1-3, at random: counts never come
    # from the process's first call only) are the evaluator's, on the command line: launch.json is in a folder
    # the candidate's processes can write
    library = work / HARNESS_DIR / "candidate.so"
    warm_calls = 1 + secrets.randbelow(3)
    cmd = [
        *ncu_mod.ncu_command(str(ncu)),
        "--log-file", str(csv_path),
        config.runner_python, str(work / HARNESS_DIR / "launch_once.py"), str(launch_job),
        str(library), str(warm_calls),
    ]  # fmt: skip
    rc, tracked = run_contained(
        cmd,
        cwd=work,
        env=child_env(config, work),
        limits=config.limits,
        timeout_s=config.stage_limits.execution_s,
        stdout_path=work / "ncu.log",
        # the GPU worker runs as the same uid and still has the timing stage to do: its close sweeps the uid
        sweep_uid=False,
        # ncu waits for every process of the candidate's tree: one the candidate started and left running
        # would hold the stage until its deadline
        launcher_grace_s=LAUNCHER_GRACE_S,
        program_marker="launch_once.py",
    )
    shown = ["ncu", *cmd[1:-5], "launch_once.py", "launch.json", "candidate.so", str(warm_calls)]
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
                + describe_bad(bad[0])
            )
    return ExecutionResult(
        status="passed" if ok else "failed",
        message=msg,
        instructions=results,
        kernels_profiled=sorted({k.name for k in kernels}),
        ncu_command=shown,
        ncu_csv_path=(
            str(config.artifacts_dir / "ncu.csv")
            if config.artifacts_dir
            else (str(csv_path) if config.keep_workdir else None)
        ),
        wall_s=wall,
    )


def minimum_count(task: TaskSpec, ptx: str) -> int | None:
    """The predicated-on count one profiled call (at the first check shape) must reach, if the task sets one:
    its own expression, else a fraction of the reference solution's recorded count, for instructions whose
    count measures work (the opcode table's ``count``: a wait or a fence is executed by as many threads as the
    kernel chooses, so a fraction of the reference's count would fail honest kernels)."""
    expr = task.execution.min_counts.get(ptx)
    if expr is not None:
        return max(1, math.ceil(evaluate(expr, task.shapes.check[0])))
    if not resolve(ptx).counts_work:
        return None
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
