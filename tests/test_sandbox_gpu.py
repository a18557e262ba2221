"""GPU stages on a real Hopper GPU (the lent H200). Skipped elsewhere; output committed under docs/validation/."""

from __future__ import annotations

import pytest

from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.tasks import load_task

pytestmark = pytest.mark.gpu

REDUX = load_task("warp-reduce-redux")
BULK = load_task("bulk-copy-scale")


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(stage_limits=StageLimits(correctness_s=20)))


def _control(task, name: str) -> str:
    return task.path(f"controls/{name}").read_text()


def test_live_instruction_passes_every_stage(sandbox):
    rep = sandbox.evaluate(REDUX, REDUX.solution_source())
    print(rep.feedback())
    assert rep.success, rep.feedback()
    (redux,) = rep.execution.instructions
    assert redux.executed and redux.predicated_on_thread_instructions > 0
    assert rep.timing.status == "passed" and rep.timing.speedup is not None


def test_bulk_copy_and_mbarrier_execute(sandbox):
    rep = sandbox.evaluate(BULK, BULK.solution_source())
    print(rep.feedback())
    assert rep.success, rep.feedback()
    assert all(i.executed for i in rep.execution.instructions)


def test_never_true_predicate_fails_the_execution_check(sandbox):
    rep = sandbox.evaluate(REDUX, _control(REDUX, "dead_redux.cu"))
    print(rep.feedback())
    assert rep.static.ok and rep.correctness.ok  # present in SASS and the output is right ...
    assert rep.execution.status == "failed"  # ... but the instruction never did work
    assert "compiled in but never executed" in rep.execution.message
    assert rep.execution.instructions[0].predicated_on_thread_instructions == 0
    assert not rep.success


def test_wrong_result_on_awkward_shape_fails_with_location(sandbox):
    rep = sandbox.evaluate(REDUX, _control(REDUX, "awkward_tail_bug.cu"))
    print(rep.feedback())
    assert rep.correctness.status == "failed"
    good, bad = rep.correctness.checks
    assert good.passed and not bad.passed  # right on the regular shape, wrong on the awkward one
    assert "awkward" in rep.correctness.message and "index [" in rep.correctness.message
    assert bad.worst_index is not None and bad.mismatches > 0


def test_hanging_kernel_is_stopped_and_the_next_evaluation_passes(sandbox):
    rep = sandbox.evaluate(REDUX, _control(REDUX, "hang.cu"))
    print(rep.feedback())
    assert rep.correctness.status == "failed"
    assert "did not finish" in rep.correctness.message
    assert rep.correctness.wall_s < 60
    again = sandbox.evaluate(REDUX, REDUX.solution_source())
    assert again.success, again.feedback()


def test_forbidden_cublas_call_is_rejected(sandbox):
    rep = sandbox.evaluate(REDUX, _control(REDUX, "cublas_call.cu"))
    assert rep.static.status == "failed" and "cublas" in rep.static.message
    assert rep.correctness.status == "skipped"


def test_work_on_a_side_stream_fails_at_the_first_checked_call(sandbox):
    rep = sandbox.evaluate(BULK, _control(BULK, "side_stream.cu"))
    print(rep.feedback())
    assert rep.correctness.status == "failed"
    assert "another stream than args->stream" in rep.correctness.message
    assert not rep.success
