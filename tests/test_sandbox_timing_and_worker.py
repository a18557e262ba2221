"""Timing verdicts (escaped streams, result reuse, implausible speedups) and the GPU worker's error path."""

from __future__ import annotations

from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.sandbox.evaluator import judge_timing
from ptxrag.sandbox.toolchain import GpuInfo
from ptxrag.tasks import load_task

TASK = load_task("bulk-copy-scale")


def _raw(cand, cand_sync, base=0.20, base_sync=0.215, recheck=True):
    return {
        "dims": dict(TASK.shapes.timing),
        "reps": 30,
        "candidate_median_ms": cand,
        "candidate_device_sync_median_ms": cand_sync,
        "baseline_median_ms": base,
        "baseline_device_sync_median_ms": base_sync,
        "recheck": [{"passed": recheck}],
    }


def test_honest_kernel_gets_its_speedup():
    t = judge_timing(TASK, _raw(0.16, 0.175), 1.0, "NVIDIA H200")
    assert t.status == "passed"
    assert abs(t.speedup - 0.20 / 0.16) < 1e-9
    assert "speedup 1.25x" in t.message


def test_the_verdict_rests_on_event_times_not_on_a_host_timing_gap():
    # off-stream work is failed by the candidate process's CUPTI record (GPU tests); a host-side gap between
    # the device-synchronised and the event time (launch overhead of a small kernel) is no evidence and
    # must not fail an honest kernel
    t = judge_timing(TASK, _raw(0.16, 0.40), 1.0, "NVIDIA H200")
    assert t.status == "passed" and abs(t.speedup - 0.20 / 0.16) < 1e-9


def test_wrong_results_after_timing_fail_the_stage():
    t = judge_timing(TASK, _raw(0.16, 0.175, recheck=False), 1.0)
    assert t.status == "failed" and t.recheck_passed is False
    assert "timed repetitions were wrong" in t.message


def test_a_time_below_the_roofline_fails_whatever_the_speedup():
    # bulk-copy-scale at n = 2^26 moves 2 x 256 MB: 0.112 ms at 4.8 TB/s is the fastest an H200 can do it
    t = judge_timing(TASK, _raw(0.05, 0.065, base=0.2, base_sync=0.215), 1.0, "NVIDIA H200")
    assert t.status == "failed" and t.implausible
    assert "roofline" in t.message and t.roofline_ms is not None and abs(t.roofline_ms - 0.1118) < 1e-3
    # just above the bound passes, even at a large speedup over a slow baseline
    t = judge_timing(TASK, _raw(0.12, 0.135, base=2.0, base_sync=2.015), 1.0, "NVIDIA H200")
    assert t.status == "passed" and not t.implausible and t.speedup > 8


def test_roofline_counts_flops_of_compute_bound_tasks():
    gemm = load_task("gemm-wgmma-bf16")  # 2*4096^3 FLOP at 989 TFLOP/s = 0.139 ms; bytes alone = 0.021 ms
    raw = _raw(0.1, 0.115, base=0.2, base_sync=0.215)
    raw["dims"] = gemm.shapes.timing
    t = judge_timing(gemm, raw, 1.0, "NVIDIA H200")
    assert t.status == "failed" and "GFLOP" in t.message
    raw = _raw(0.15, 0.165, base=0.2, base_sync=0.215)
    raw["dims"] = gemm.shapes.timing
    assert judge_timing(gemm, raw, 1.0, "NVIDIA H200").status == "passed"


def test_unknown_gpu_has_no_bound_and_says_so():
    t = judge_timing(TASK, _raw(0.05, 0.065), 1.0, "Some Future GPU")
    assert t.status == "passed" and t.roofline_ms is None and "no roofline bound" in t.message


def test_a_timed_repetition_with_wrong_samples_fails_with_its_reason():
    raw = _raw(0.16, 0.175)
    raw["recheck"] = [
        {"passed": False, "error": "timed repetition 7: sampled outputs wrong (work skipped or reused?)"}
    ]
    t = judge_timing(TASK, raw, 1.0, "NVIDIA H200")
    assert t.status == "failed" and "repetition 7" in t.message


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
