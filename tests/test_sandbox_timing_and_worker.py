"""Timing verdicts (escaped streams, result reuse, implausible speedups) and the GPU worker's error path."""

from __future__ import annotations

from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.sandbox.evaluator import judge_timing
from ptxrag.sandbox.toolchain import GpuInfo
from ptxrag.tasks import load_task

TASK = load_task("bulk-copy-scale")


def _raw(cand, cand_sync, base=0.20, base_sync=0.215, recheck=True):
    return {
        "dims": {"n": 1},
        "reps": 30,
        "candidate_median_ms": cand,
        "candidate_device_sync_median_ms": cand_sync,
        "baseline_median_ms": base,
        "baseline_device_sync_median_ms": base_sync,
        "recheck": [{"passed": recheck}],
    }


def test_honest_kernel_gets_its_speedup():
    t = judge_timing(TASK, _raw(0.16, 0.175), 1.0)
    assert t.status == "passed" and not t.escaped_stream
    assert abs(t.speedup - 0.20 / 0.16) < 1e-9
    assert "speedup 1.25x" in t.message


def test_work_on_another_stream_is_caught_and_timed_honestly():
    # events on the given stream saw 5 us, the device-synchronised run took the real 0.18 ms
    t = judge_timing(TASK, _raw(0.005, 0.19), 1.0)
    assert t.status == "failed" and t.escaped_stream
    assert "escaped the given stream" in t.message
    assert t.speedup is not None and t.speedup < 1.5  # judged on the synchronised time, not 40x


def test_wrong_results_after_timing_fail_the_stage():
    t = judge_timing(TASK, _raw(0.16, 0.175, recheck=False), 1.0)
    assert t.status == "failed" and t.recheck_passed is False
    assert "fresh inputs after the timing loop" in t.message


def test_implausible_speedup_is_flagged():
    t = judge_timing(TASK, _raw(0.01, 0.025, base=0.5, base_sync=0.515), 1.0)
    assert t.implausible and "implausible" in t.message


def test_worker_without_cuda_is_a_harness_error_not_a_candidate_failure():
    # pretend a Hopper GPU is here: the real worker starts, finds no CUDA, and says so
    sb = Sandbox(
        SandboxConfig(stage_limits=StageLimits(gpu_start_s=120)), gpu=GpuInfo("pretend H200", (9, 0))
    )
    rep = sb.evaluate(TASK, TASK.solution_source())
    assert rep.compile.ok and rep.static.ok
    assert rep.correctness.status in ("error", "failed")
    assert "CUDA" in rep.correctness.message or "cuda" in rep.correctness.message
    assert rep.execution.status == "skipped" and rep.timing.status == "skipped"
    assert not rep.success


def test_arch_mismatch_is_not_runnable_here():
    sb = Sandbox(gpu=GpuInfo("an Ampere card", (8, 0)))
    rep = sb.evaluate(TASK, TASK.solution_source())
    assert rep.correctness.status == "skipped"
    assert "not runnable here" in rep.correctness.message and "sm_90a" in rep.correctness.message
