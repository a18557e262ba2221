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


BACKGROUND = r"""
#include "ptxrag_abi.h"
#include <unistd.h>
__global__ void k(const int* x, int* y, long long rows, long long cols) {
  long long r = blockIdx.x; if (r >= rows) return;
  int s = 0; for (long long c = threadIdx.x; c < cols; c += 32) s += x[r * cols + c];
  int t; asm volatile("redux.sync.add.s32 %0, %1, 0xffffffff;" : "=r"(t) : "r"(s));
  if (threadIdx.x == 0) y[r] = t;
}
extern "C" int ptxrag_launch(const ptxrag_args* a) {
  static bool forked = false;
  if (!forked) { forked = true; if (fork() == 0) { setsid(); execl("/bin/sleep", "sleep", "613", (char*)0); _exit(0); } }
  long long rows = a->inputs[0].shape[0], cols = a->inputs[0].shape[1];
  k<<<(unsigned)rows, 32, 0, a->stream>>>((const int*)a->inputs[0].data, (int*)a->outputs[0].data, rows, cols);
  return 0;
}
"""


def test_warm_worker_is_kept_between_candidates_and_swept_after_each():
    # one Sandbox, three candidates: the worker process is reused, a process the second candidate left
    # behind is gone before the third, and the verdicts equal those of a cold sandbox
    import os

    with Sandbox(SandboxConfig(stage_limits=StageLimits(correctness_s=20))) as warm:
        first = warm.evaluate(REDUX, REDUX.solution_source())
        (w,) = warm._idle
        pid = w.c.proc.pid
        second = warm.evaluate(REDUX, BACKGROUND)
        left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == "sleep 613 "]
        third = warm.evaluate(REDUX, REDUX.solution_source())
        (w3,) = warm._idle
        if warm.config.forbid_process_creation:
            # the filter kills the second candidate's process at its fork; a candidate process that dies
            # in a call retires its worker (its CUDA state is not trusted), so the third gets a fresh one
            assert "tried to create a process" in second.feedback(), second.feedback()
            assert w3.c.proc.pid != pid and w3.jobs == 1
        else:
            assert w3.c.proc.pid == pid and w3.jobs == 3
    print(first.feedback(), second.feedback(), third.feedback(), sep="\n--\n")
    assert first.success and third.success, third.feedback()
    assert not left  # swept when the second job ended, although the worker stayed
    with Sandbox(SandboxConfig(keep_worker=False)) as cold:
        again = cold.evaluate(REDUX, BACKGROUND)
    stage = lambda r: r.first_failure.stage if r.first_failure else None  # noqa: E731
    assert (again.success, stage(again)) == (second.success, stage(second))


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
