"""Prove a task is sound: every required instruction is one the sandbox can prove executed, its reference
solution passes every stage and each negative control fails at the stage it declares. Without a suitable
GPU the GPU stages are skipped, so a control declared for a GPU stage is reported as not verified here,
never as passed.

This sits above both the tasks (data and their loader) and the sandbox (the evaluator and its opcode table),
so that neither of them imports the other's way: the sandbox reads task specs, tasks never import the
sandbox (the import contracts in pyproject.toml).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ptxrag.sandbox import EvaluationReport
from ptxrag.sandbox.opcodes import UnknownInstruction, resolve
from ptxrag.sandbox.protocol import Evaluator
from ptxrag.tasks import COUNTS_FILE, TaskError, TaskSpec

Verdict = Literal["ok", "FAILED", "not verified"]


@dataclass
class ControlOutcome:
    file: str
    must_fail_at: str
    failed_at: str | None
    verdict: Verdict
    message: str
    report: EvaluationReport | None = None


@dataclass
class AlternativeOutcome:
    """A second honest solution: it must pass like the reference."""

    file: str
    verdict: Verdict
    message: str
    report: EvaluationReport | None = None


@dataclass
class TaskValidation:
    task: TaskSpec
    reference: EvaluationReport
    reference_verdict: Verdict
    controls: list[ControlOutcome] = field(default_factory=list)
    alternatives: list[AlternativeOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.reference_verdict != "FAILED"
            and all(c.verdict != "FAILED" for c in self.controls)
            and all(a.verdict != "FAILED" for a in self.alternatives)
        )


GPU_STAGES = ("correctness", "execution", "mutation", "timing")


def _reference_verdict(rep: EvaluationReport) -> Verdict:
    if rep.success and rep.timing.status != "skipped":
        return "ok"
    if rep.first_failure is not None:
        return "FAILED"
    return "not verified"  # nothing failed, but GPU stages were skipped


def check_required_ptx(task: TaskSpec) -> None:
    """Every required instruction must have SASS opcodes the execution check can count (the sandbox's opcode
    table is the authority); raises :class:`TaskError` naming the spec file and the fix."""
    spec_file = task.path("task.toml")
    for ptx in task.required_ptx:
        try:
            req = resolve(ptx)
        except UnknownInstruction as e:
            raise TaskError(f"{spec_file}: required_ptx: {e}") from None
        if not req.verifiable:
            notes = "; ".join(r.note for r in req.rows if r.note)
            raise TaskError(
                f"{spec_file}: required_ptx {ptx!r} has no distinctive SASS opcode, so its execution cannot be "
                f"proven ({notes}); require an instruction the opcode table can verify"
            )


def validate_task(
    task: TaskSpec, sandbox: Evaluator, on_progress: Callable[[str], None] | None = None
) -> TaskValidation:
    """Check the task's instructions against the opcode table (raises :class:`TaskError`), then run its
    reference solution and every control through ``sandbox``."""
    check_required_ptx(task)
    say = on_progress or (lambda _m: None)
    say(f"{task.id}: reference solution")
    ref = sandbox.evaluate(task, task.solution_source())
    out = TaskValidation(task, ref, _reference_verdict(ref))
    for c in task.controls:
        say(f"{task.id}: control {c.file} (must fail at {c.stages_label})")
        rep = sandbox.evaluate(task, task.path(c.file).read_text())
        first = rep.first_failure
        failed_at = first.stage if first is not None else None
        if first is not None and first.status == "error":
            # the harness broke, the control was never judged: failing "where declared" this way proves nothing
            verdict: Verdict = "FAILED"
            msg = f"harness error at {failed_at}, so the control was not judged: {first.message}"
        elif failed_at in c.stages:
            verdict = "ok"
            msg = first.message if first else ""
        elif failed_at is None and set(c.stages) & set(GPU_STAGES) and rep.correctness.status == "skipped":
            verdict, msg = "not verified", rep.correctness.message
        elif failed_at is None:
            verdict, msg = "FAILED", "the control PASSED every stage that ran: the checker was fooled"
        else:
            verdict = "FAILED"
            msg = f"failed at {failed_at} instead of {c.stages_label}: {first.message if first else ''}"
        out.controls.append(ControlOutcome(c.file, c.stages_label, failed_at, verdict, msg, rep))
    for a in task.alternatives:
        say(f"{task.id}: honest alternative {a.file} (must pass)")
        rep = sandbox.evaluate(task, task.path(a.file).read_text())
        v = _reference_verdict(rep)
        first = rep.first_failure
        msg = f"failed at {first.stage}: {first.message}" if first is not None else ""
        out.alternatives.append(AlternativeOutcome(a.file, v, msg, rep))
    return out


def record_reference_counts(task: TaskSpec, rep: EvaluationReport) -> Path | None:
    """Write the reference solution's predicated-on counts (first check shape) next to task.toml, so that
    ``execution.min_fraction_of_reference`` has something to be a fraction of. Only from a passed run."""
    if rep.execution.status != "passed":
        return None
    doc = {
        "recorded_by": "ptxrag tasks validate --record-counts",
        "gpu": rep.gpu,
        "dims": task.shapes.check[0],
        "counts": {i.ptx: i.predicated_on_thread_instructions for i in rep.execution.instructions},
    }
    path = task.path(COUNTS_FILE)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
