"""Mutation: each required instruction's effect removed in the PTX (``sandbox/mutation.py`` builds the
mutants); every mutant must then fail the correctness checks, in a fresh candidate process of the worker."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import Future
from pathlib import Path

from ptxrag.base.deadlines import harness_timeout
from ptxrag.tasks.spec import TaskSpec

from ..config import SandboxConfig
from ..mutation import Mutant, build_mutants
from ..results import CheckResult, MutantOutcome, MutationResult
from ..worker_client import WorkerDied, WorkerProcess
from .correctness import describe_bad


def build_task_mutants(config: SandboxConfig, task: TaskSpec, source: str) -> list[Mutant]:
    return build_mutants(source, task.gencode, task.required_ptx, timeout_s=config.stage_limits.compile_s)


def run_mutant(w: WorkerProcess, library: Path, tag: int, limit_s: float) -> tuple[str, str]:
    """A mutant's correctness checks in a fresh candidate process of this (loaded) worker:
    ("output changed" | "output unchanged" | "not built", detail)."""
    lib = w.harness / f"mutant-{tag}.so"  # the parent's folder: a candidate process cannot swap it
    shutil.copy2(library, lib)
    lib.chmod(0o644)
    try:
        res = w.ask(
            {"cmd": "mutant", "library": str(lib), "tag": tag, "limit_s": limit_s},
            limit_s + w.config.stage_limits.gpu_start_s,
            "a mutant's checks",
        )
    except WorkerDied as e:
        return "not built", f"the worker stopped during the mutant: {e}"
    finally:
        lib.unlink(missing_ok=True)
    if not res.get("ok"):
        return "not built", f"harness: {res.get('error', '?')}"
    outcome = res.get("outcome")
    if outcome == "not loaded":
        return "not built", f"the mutant did not load: {res.get('error', '')}"
    if outcome in ("error", "violation"):
        # an error code from ptxrag_launch with no device fault (a fault is sticky and shows as "faulted"), or
        # a forbidden behaviour, is what the mutant's host code chose, and a kernel that knows it is a mutant
        # (its process's first call with the job's files already there, its library's name) could choose it:
        # before, it counted as "the output changed"
        return "host refused", f"the mutant {outcome}: {res.get('error', '')}"
    if outcome != "checks":
        return "output changed", f"the mutant {outcome}: {res.get('error', '')}"
    checks = [CheckResult(**{k: v for k, v in c.items() if k != "seed"}) for c in res["checks"]]
    bad = [c for c in checks if not c.passed]
    if not bad:
        return "output unchanged", "every check still passed without it"
    return "output changed", describe_bad(bad[0])


def run_mutation(
    task: TaskSpec, mutants: Future[list[Mutant]] | None, worker: WorkerProcess, limit_s: float
) -> MutationResult:
    """Each required instruction's effect removed: the correctness check must then fail (or the kernel
    fault or hang), else the instruction executed without its result mattering."""
    t0 = time.monotonic()
    if mutants is None:
        return MutationResult(status="error", message="no mutants were built (harness)")
    try:
        # a backstop: each of the build's commands (dry run, --keep build, one replay per instruction) has
        # its own load-stretched deadline; this waits for all of them run one after another
        n = len(task.required_ptx)
        built = mutants.result(timeout=harness_timeout(worker.config.stage_limits.compile_s) * (2 + n))
    except Exception as e:  # noqa: BLE001 - the mutant build is harness work
        return MutationResult(status="error", message=f"building mutants failed: {type(e).__name__}: {e}")
    try:
        return _judge(built, worker, limit_s, t0)
    finally:
        # build_mutants wrote them into a temporary folder of their own
        for folder in {Path(m.library_path).parent for m in built if m.library_path}:
            if folder.name.startswith("ptxrag-mutants-") or folder.parent.name.startswith("ptxrag-mutants-"):
                shutil.rmtree(folder if folder.name.startswith("ptxrag-mutants-") else folder.parent, True)


def _judge(built: list[Mutant], worker: WorkerProcess, limit_s: float, t0: float) -> MutationResult:
    outcomes: list[MutantOutcome] = []
    for m in built:
        if m.status == "not_mutable":
            outcomes.append(
                MutantOutcome(ptx=m.instruction, status="not mutable", how=m.how, detail=m.message)
            )
            continue
        if m.status != "built" or not m.library_path:
            outcomes.append(MutantOutcome(ptx=m.instruction, status="not built", how=m.how, detail=m.message))
            continue
        status, detail = run_mutant(worker, Path(m.library_path), len(outcomes), limit_s)
        outcomes.append(MutantOutcome(ptx=m.instruction, status=status, how=m.how, detail=detail[:300]))  # type: ignore[arg-type]
    unchanged = [o for o in outcomes if o.status == "output unchanged"]
    tested = [o for o in outcomes if o.status in ("output changed", "output unchanged", "host refused")]
    wall = time.monotonic() - t0
    refused = [o for o in outcomes if o.status == "host refused"]
    if refused and not unchanged:
        o = refused[0]
        return MutationResult(
            status="failed",
            message=f"the mutant without {o.ptx} ({o.how}) did not run as the candidate does: {o.detail}; only "
            "a wrong output, a fault or a hang shows that the instruction's result mattered",
            mutants=outcomes,
            wall_s=wall,
        )
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
        msg = "no required instruction could be mutated: " + ", ".join(f"{o.ptx} ({o.detail})" for o in rest)
    return MutationResult(status="passed", message=msg, mutants=outcomes, wall_s=wall)
