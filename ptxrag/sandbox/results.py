"""Typed results of each evaluation stage. Every result carries a short ``message`` a model can act on.

Status meanings:
- ``passed``  the stage ran and its check held;
- ``failed``  the stage ran and the candidate failed it (the candidate's fault: feedback for the model);
- ``skipped`` the stage did not run (no GPU here, an earlier stage failed, or it does not apply);
- ``error``   the harness itself broke (not the candidate's fault); the message says what to fix.
A GPU stage that did not run is ``skipped``, never ``passed``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["passed", "failed", "skipped", "error"]
StageName = Literal["compile", "static", "correctness", "execution", "mutation", "timing"]
STAGES: tuple[StageName, ...] = ("compile", "static", "correctness", "execution", "mutation", "timing")


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StageResult(_Result):
    stage: StageName
    status: Status
    message: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "passed"


class CompileResult(StageResult):
    stage: Literal["compile"] = "compile"
    command: list[str] = Field(default_factory=list)
    log: str = Field("", description="compiler output, trimmed to the errors that matter")
    cache_hit: bool = False
    library_path: str | None = None
    toolchain: str = ""


class InstructionPresence(_Result):
    ptx: str
    sass_patterns: list[str]
    sass_found: list[str] = Field(default_factory=list, description="distinct SASS opcodes matched")
    present: bool


class StaticResult(StageResult):
    stage: Literal["static"] = "static"
    instructions: list[InstructionPresence] = Field(default_factory=list)
    forbidden_hits: list[str] = Field(default_factory=list)
    kernels: list[str] = Field(default_factory=list, description="device functions in the binary")
    sass_excerpt: str = ""


class CheckResult(_Result):
    """One correctness check: one input set, fresh random inputs, outputs poisoned first."""

    label: str
    dims: dict[str, int]
    passed: bool
    output: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_index: list[int] | None = None
    worst_value: float | None = None
    expected_value: float | None = None
    mismatches: int = 0
    numel: int = 0
    unwritten: int = Field(0, description="elements still holding the poison value")
    nonfinite: int = 0
    error: str = ""


class CorrectnessResult(StageResult):
    stage: Literal["correctness"] = "correctness"
    checks: list[CheckResult] = Field(default_factory=list)
    stdout_tail: str = ""


class InstructionExecution(_Result):
    ptx: str
    sass_opcodes: list[str] = Field(default_factory=list)
    sass_rows: int = 0
    instructions_executed: int = 0
    thread_instructions_executed: int = 0
    predicated_on_thread_instructions: int = 0
    executed: bool = False
    min_required: int | None = Field(
        None,
        description="predicated-on count one call must reach (task expression or fraction of the reference)",
    )


class ExecutionResult(StageResult):
    stage: Literal["execution"] = "execution"
    instructions: list[InstructionExecution] = Field(default_factory=list)
    kernels_profiled: list[str] = Field(default_factory=list)
    ncu_command: list[str] = Field(default_factory=list)
    ncu_csv_path: str | None = None


class MutantOutcome(_Result):
    """One required instruction, removed or with its result replaced, and what the correctness check said."""

    ptx: str
    #: "host refused": the mutant's ptxrag_launch returned an error code without a device fault, or broke a
    #: run-time rule: the host's choice, no evidence about the instruction's result (the candidate fails)
    status: Literal["output changed", "output unchanged", "host refused", "not mutable", "not built"]
    how: str = ""
    detail: str = ""


class MutationResult(StageResult):
    """The instruction's result must matter: a rebuild without it must fail the correctness check."""

    stage: Literal["mutation"] = "mutation"
    mutants: list[MutantOutcome] = Field(default_factory=list)


class TimingResult(StageResult):
    stage: Literal["timing"] = "timing"
    dims: dict[str, int] = Field(default_factory=dict)
    candidate_median_ms: float | None = None
    baseline_median_ms: float | None = None
    candidate_device_sync_median_ms: float | None = None
    baseline_device_sync_median_ms: float | None = None
    baseline_cached: bool = Field(
        False, description="the library's time was measured earlier by this warm worker, same task and shape"
    )
    reps: int = 0
    speedup: float | None = Field(None, description="baseline time / candidate time")
    implausible: bool = Field(
        False, description="below the roofline bound or above the task's speedup ceiling"
    )
    roofline_ms: float | None = Field(
        None, description="fastest possible time on this GPU; below it = failed"
    )
    recheck_passed: bool | None = Field(None, description="outputs right on unseen inputs after timing")


class EvaluationReport(_Result):
    """The verdict on one candidate for one task."""

    task_id: str
    source_sha256: str
    arch: str
    success: bool = Field(description="compile, correctness and every target instruction's execution passed")
    compile: CompileResult
    static: StaticResult
    correctness: CorrectnessResult
    execution: ExecutionResult
    mutation: MutationResult = Field(
        default_factory=lambda: MutationResult(
            status="skipped", message="not run (report from before the mutation stage)"
        )
    )
    timing: TimingResult
    gpu: str | None = None
    total_wall_s: float = 0.0

    def stages(self) -> list[StageResult]:
        return [self.compile, self.static, self.correctness, self.execution, self.mutation, self.timing]

    @property
    def first_failure(self) -> StageResult | None:
        for s in self.stages():
            if s.status in ("failed", "error"):
                return s
        return None

    def feedback(self) -> str:
        """A compact text for the next prompt: every stage's status and message."""
        lines = [f"[{s.stage}] {s.status}: {s.message}" for s in self.stages()]
        if self.compile.status == "failed" and self.compile.log:
            lines.append("compiler output:\n" + self.compile.log)
        return "\n".join(lines)


def skipped(stage: StageName, why: str) -> StageResult:
    """A skipped result of the right type for ``stage``."""
    cls = {
        "compile": CompileResult,
        "static": StaticResult,
        "correctness": CorrectnessResult,
        "execution": ExecutionResult,
        "mutation": MutationResult,
        "timing": TimingResult,
    }[stage]
    return cls(status="skipped", message=why)
