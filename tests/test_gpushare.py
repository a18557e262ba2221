"""The sandbox's one GPU-sharing mechanism: checks share the GPU (up to a number of candidates), measurements
have it alone, a waiting measurement is not starved, across threads and processes; the sandbox takes the GPU
shared for correctness and mutation and alone for the ncu launch and timing."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ptxrag.sandbox import GpuInfo, Sandbox, SandboxConfig
from ptxrag.sandbox import evaluator as evaluator_mod
from ptxrag.sandbox.gpushare import GpuShare
from ptxrag.sandbox.results import CorrectnessResult, ExecutionResult, MutationResult, TimingResult
from ptxrag.tasks import load_task


class Inside:
    """Who holds the GPU now; fails the test on any forbidden overlap."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.shared = 0
        self.exclusive = 0
        self.bad: list[str] = []

    def enter(self, kind: str) -> None:
        with self.guard:
            if kind == "exclusive":
                if self.shared or self.exclusive:
                    self.bad.append(f"exclusive entered with shared={self.shared} exclusive={self.exclusive}")
                self.exclusive += 1
            else:
                if self.exclusive:
                    self.bad.append("shared entered while exclusive held")
                self.shared += 1

    def leave(self, kind: str) -> None:
        with self.guard:
            if kind == "exclusive":
                self.exclusive -= 1
            else:
                self.shared -= 1


def test_two_checks_share_the_gpu_a_third_waits(tmp_path):
    share = GpuShare("0", lock_dir=tmp_path, shared=2)
    both_in = threading.Barrier(2, timeout=120)  # passes only if two holders are inside at the same time
    peak, guard, inside = 0, threading.Lock(), 0

    def check() -> None:
        nonlocal peak, inside
        with share.shared():
            with guard:
                inside += 1
                peak = max(peak, inside)
            with contextlib.suppress(threading.BrokenBarrierError):
                both_in.wait()
            time.sleep(0.05)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=check) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2 and share.peak_shared == 2 and not both_in.broken


def test_with_one_slot_checks_are_exclusive(tmp_path):
    share = GpuShare("0", lock_dir=tmp_path, shared=1)
    together = threading.Barrier(2, timeout=1.0)
    broke = []

    def check() -> None:
        with share.shared():
            try:
                together.wait()
            except threading.BrokenBarrierError:
                broke.append(True)

    threads = [threading.Thread(target=check) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert broke  # the two were never inside at once


def test_measurements_never_overlap_anything(tmp_path):
    share = GpuShare("0", lock_dir=tmp_path, shared=3)
    seen = Inside()

    def hold(kind: str) -> None:
        for _ in range(5):
            with share.exclusive() if kind == "exclusive" else share.shared():
                seen.enter(kind)
                time.sleep(0.01)
                seen.leave(kind)

    threads = [threading.Thread(target=hold, args=(k,)) for k in ["shared"] * 4 + ["exclusive"] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not seen.bad


def _wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + 120
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def test_a_waiting_measurement_goes_before_later_checks(tmp_path):
    share = GpuShare("0", lock_dir=tmp_path, shared=4)
    order: list[str] = []
    release_first = threading.Event()

    def first() -> None:
        with share.shared():
            order.append("check 1 in")
            release_first.wait(120)
        order.append("check 1 out")

    def measure() -> None:
        with share.exclusive():
            order.append("measure in")
        order.append("measure out")

    def later() -> None:
        with share.shared():
            order.append("check 2 in")

    t1 = threading.Thread(target=first)
    t1.start()
    _wait_until(lambda: "check 1 in" in order, "the first check holds the GPU")
    t2 = threading.Thread(target=measure)
    t2.start()
    _wait_until(lambda: share._writers_waiting == 1, "the measurement waits")
    t3 = threading.Thread(target=later)
    t3.start()
    time.sleep(0.2)
    assert "check 2 in" not in order  # a free shared slot, but the waiting measurement goes first
    release_first.set()
    for t in (t1, t2, t3):
        t.join(120)
    assert order.index("check 2 in") > order.index("measure in")


def test_a_check_in_another_process_keeps_a_measurement_waiting(tmp_path):
    done, go = tmp_path / "check-done", tmp_path / "go"
    holder = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from ptxrag.sandbox.gpushare import GpuShare
        with GpuShare("5", lock_dir=Path({str(tmp_path)!r}), shared=2).shared():
            print("IN", flush=True)
            while not Path({str(go)!r}).exists():
                time.sleep(0.01)
            time.sleep(0.5)
            Path({str(done)!r}).write_text("done")  # still holding the GPU
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "IN"
        here = GpuShare("5", lock_dir=tmp_path, shared=2)
        with here.shared():  # checks of two processes may share
            assert not done.exists()
        go.write_text("go")
        with here.exclusive():
            assert done.exists()  # it got in only once the other process's check had ended
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def test_shared_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="at least 1"):
        GpuShare("0", lock_dir=tmp_path, shared=0)


class FakeWorker:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.harness = work / "harness"  # the parent-owned folder the evaluator writes the job into
        self.harness.mkdir(parents=True, exist_ok=True)


def test_the_sandbox_checks_shared_and_measures_alone(tmp_path, monkeypatch):
    # the stages are doubles that record how the GPU was held when they ran; compile and static are real
    task = load_task("warp-reduce-redux")

    class Recording(GpuShare):
        held: list[str] = []
        now: str | None = None

        def shared(self):  # type: ignore[override]
            return self._as("shared")

        def exclusive(self):  # type: ignore[override]
            return self._as("exclusive")

        def _as(self, kind):

            @contextlib.contextmanager
            def cm():
                Recording.now = kind
                yield
                Recording.now = None

            return cm()

    def stage(name, result):
        def run(*_a, **_k):
            Recording.held.append(f"{name}:{Recording.now}")
            return result

        return run

    monkeypatch.setattr(
        evaluator_mod, "run_correctness", stage("correctness", CorrectnessResult(status="passed"))
    )
    monkeypatch.setattr(evaluator_mod, "run_execution", stage("execution", ExecutionResult(status="passed")))
    monkeypatch.setattr(evaluator_mod, "run_mutation", stage("mutation", MutationResult(status="passed")))
    monkeypatch.setattr(evaluator_mod, "run_timing", stage("timing", TimingResult(status="passed")))
    monkeypatch.setattr(evaluator_mod, "build_task_mutants", lambda *_a: [])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(Sandbox, "_take_worker", lambda self: FakeWorker(work))
    monkeypatch.setattr(Sandbox, "_release_worker", lambda self, w: None)
    gpu = GpuInfo(name="NVIDIA H200", compute_capability=(9, 0))
    share = Recording("0", lock_dir=tmp_path / "locks", shared=2)
    cpu_held = []
    sb = Sandbox(SandboxConfig(gpu_share=share, cpu_lock=lambda: _recording_cm(cpu_held)), gpu=gpu)
    rep = sb.evaluate(task, task.solution_source())
    assert rep.compile.ok and rep.static.ok, rep.feedback()
    assert Recording.held == [
        "correctness:shared",
        "execution:exclusive",
        "mutation:shared",
        "timing:exclusive",
    ]
    assert cpu_held == ["in", "out"]


def _recording_cm(log: list[str]):

    @contextlib.contextmanager
    def cm():
        log.append("in")
        yield
        log.append("out")

    return cm()


def test_the_service_and_a_bench_on_one_gpu_take_turns_for_measurements():
    from ptxrag.sandbox.service.server import GpuSlot

    slot = GpuSlot(
        f"t{time.time_ns()}"
    )  # the service's slot for one GPU (lock files under the default folder)
    bench = GpuShare(slot.share.path.name.removeprefix("gpu-").removesuffix(".lock"))
    order: list[str] = []
    with slot.exclusive():
        assert slot.holders == 1

        def measure() -> None:
            with bench.exclusive():
                order.append("bench in")

        t = threading.Thread(target=measure)
        t.start()
        time.sleep(0.2)
        order.append("service out")
    t.join(120)
    assert order == ["service out", "bench in"] and slot.holders == 0 and slot.busy_s > 0
