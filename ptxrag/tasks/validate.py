"""Prove a task is sound: its reference solution passes every stage and each negative control fails at
the stage it declares. Without a suitable GPU the GPU stages are skipped, so a control declared for a GPU
stage is reported as not verified here, never as passed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .spec import COUNTS_FILE, TaskSpec

if TYPE_CHECKING:
    from ptxrag.sandbox import EvaluationReport, Sandbox

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


def validate_task(
    task: TaskSpec, sandbox: Sandbox, on_progress: Callable[[str], None] | None = None
) -> TaskValidation:
    say = on_progress or (lambda _m: None)
    say(f"{task.id}: reference solution")
    ref = sandbox.evaluate(task, task.solution_source())
    out = TaskValidation(task, ref, _reference_verdict(ref))
    for c in task.controls:
        say(f"{task.id}: control {c.file} (must fail at {c.must_fail_at})")
        rep = sandbox.evaluate(task, task.path(c.file).read_text())
        first = rep.first_failure
        failed_at = first.stage if first is not None else None
        if failed_at == c.must_fail_at:
            verdict: Verdict = "ok"
            msg = first.message if first else ""
        elif failed_at is None and c.must_fail_at in GPU_STAGES and rep.correctness.status == "skipped":
            verdict, msg = "not verified", rep.correctness.message
        elif failed_at is None:
            verdict, msg = "FAILED", "the control PASSED every stage that ran: the checker was fooled"
        else:
            verdict = "FAILED"
            msg = f"failed at {failed_at} instead of {c.must_fail_at}: {first.message if first else ''}"
        out.controls.append(ControlOutcome(c.file, c.must_fail_at, failed_at, verdict, msg, rep))
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
