"""GPU stages one at a time per GPU: the lock holds across threads and processes, and the staged evaluator
sends only candidates that pass the CPU stages to the GPU, never two at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from pathlib import Path

import pytest

from ptxrag.agent_graph import extract_code
from ptxrag.bench.executors import GpuLock, StagedEvaluator
from ptxrag.sandbox.results import (
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    StaticResult,
    TimingResult,
)
from ptxrag.tasks import load_task

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bench" / "warp-elect-sum.toml"


def test_gpu_lock_lets_one_thread_in_at_a_time(tmp_path):
    lock = GpuLock("0", lock_dir=tmp_path)
    inside, peak, guard = 0, 0, threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        with lock.hold():
            with guard:
                inside += 1
                peak = max(peak, inside)
            time.sleep(0.05)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 1 and inside == 0


def test_gpu_lock_waits_for_another_process(tmp_path):
    holder = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from ptxrag.bench.executors import GpuLock
        with GpuLock("7", lock_dir=Path({str(tmp_path)!r})).hold():
            print("LOCKED", flush=True)
            time.sleep(1.5)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "LOCKED"
        t0 = time.monotonic()
        with GpuLock("7", lock_dir=tmp_path).hold():
            waited = time.monotonic() - t0
        assert waited > 0.8  # it had to wait for the other process to let go
        other = GpuLock("8", lock_dir=tmp_path)  # another GPU: no waiting
        t0 = time.monotonic()
        with other.hold():
            assert time.monotonic() - t0 < 0.5
    finally:
        proc.wait(timeout=30)


class RecordingGpu:
    """A GPU-side double: records what reaches it and whether two ever overlap; says 'success'."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.inside = 0
        self.peak = 0
        self._guard = threading.Lock()

    def evaluate(self, task, source):
        with self._guard:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self.seen.append(source)
        try:
            time.sleep(0.3)
            return EvaluationReport(
                task_id=task.id, source_sha256="double", arch=task.arch, success=True, gpu="double",
                compile=CompileResult(status="passed"), static=StaticResult(status="passed"),
                correctness=CorrectnessResult(status="passed"), execution=ExecutionResult(status="passed"),
                timing=TimingResult(status="passed", speedup=1.5),
            )  # fmt: skip
        finally:
            with self._guard:
                self.inside -= 1


def test_staged_evaluator_sends_only_cpu_passes_to_the_gpu_one_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "home"))  # an empty compile cache
    task = load_task("warp-elect-sum")
    replies = [extract_code(r["text"]).code for r in tomllib.loads(FIXTURE.read_text())["reply"]]
    static_fail, good = replies
    broken = good.replace("__global__ void vec_sum", "__global__ void vec_sum(  // syntax error\n")
    variant = good.replace("264, 256", "132, 512")  # a second candidate that passes the CPU stages
    gpu = RecordingGpu()
    ev = StagedEvaluator(compile_slots=2, gpu_sandbox=gpu, gpu_lock=GpuLock("0", lock_dir=tmp_path))
    results: dict[str, object] = {}

    def run(name: str, src: str) -> None:
        results[name] = ev.evaluate(task, src)

    # the twins first: with two slots they would compile side by side if nothing stopped them
    jobs = [("static_fail", static_fail), ("static_fail_again", static_fail), ("good", good),
            ("broken", broken), ("variant", variant)]  # fmt: skip
    threads = [threading.Thread(target=run, args=a) for a in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(gpu.seen) == sorted([good, variant]) and gpu.peak == 1
    assert ev.cpu_evaluations == 5 and ev.gpu_evaluations == 2
    assert results["good"].gpu == "double" and results["variant"].gpu == "double"  # type: ignore[attr-defined]
    assert results["broken"].compile.status == "failed" and results["broken"].gpu is None  # type: ignore[attr-defined]
    twins = [results[k] for k in ("static_fail", "static_fail_again")]
    assert all(r.static.status == "failed" for r in twins)  # type: ignore[attr-defined]
    # the same source twice at once: compiled once, the other waited and read the cache
    assert sorted(r.compile.cache_hit for r in twins) == [False, True]  # type: ignore[attr-defined]


def test_without_a_gpu_the_cpu_pass_is_the_whole_evaluation(monkeypatch):
    from ptxrag.sandbox import toolchain

    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    toolchain.detect_gpu.cache_clear()
    ev = StagedEvaluator(compile_slots=1)
    assert ev.gpu is None and ev.lock is None
    good = extract_code(tomllib.loads(FIXTURE.read_text())["reply"][1]["text"]).code
    report = ev.evaluate(load_task("warp-elect-sum"), good)
    assert report.static.ok and report.correctness.message == "skipped: no GPU"
    assert ev.cpu_evaluations == 1 and ev.gpu_evaluations == 0


class _StandInWorker:
    """A GPU worker stand-in: counts starts and stops (a real one imports PyTorch when started)."""

    started = 0
    stopped = 0

    def __init__(self, config) -> None:
        type(self).started += 1
        self.reusable = True

    def begin_job(self, artifacts_dir=None) -> None:
        pass

    def end_job(self) -> bool:
        return True

    def close(self) -> None:
        type(self).stopped += 1


@pytest.mark.parametrize("concurrency", [1, 4])
def test_as_many_workers_stay_warm_as_candidates_are_in_flight(monkeypatch, concurrency):
    """Four candidates at a time with room for two idle workers stopped two after every round and started two
    cold ones for the next (the H200 throughput run of 2026-12-04): the evaluator keeps one per candidate."""
    from ptxrag.sandbox import evaluator

    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    monkeypatch.setattr(evaluator, "WorkerProcess", _StandInWorker)
    monkeypatch.setattr(_StandInWorker, "started", 0)
    monkeypatch.setattr(_StandInWorker, "stopped", 0)
    ev = StagedEvaluator(compile_slots=1, concurrency=concurrency)
    sb = ev.cpu
    for _round in range(3):
        held = [sb._take_worker() for _ in range(concurrency)]
        for w in held:
            sb._release_worker(w)
    assert _StandInWorker.started == concurrency  # every round after the first found its workers warm
    assert _StandInWorker.stopped == 0
