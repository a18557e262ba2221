"""What the GPU worker shares with the candidate's process (issue 15, classes 1 and 2; session 6).

CUDA IPC maps a whole cudaMalloc allocation, and PyTorch's caching allocator carves many tensors out of one.
Before, inputs and outputs came from the default pool, so the candidate's process could map the private copy
of its inputs (and the references, the timed repetitions' samples) that happened to share a segment with them,
and zero input and copy alike. Now every tensor it maps comes from ExposedMemory (a MemPool of its own) and
the worker refuses to share any other allocation. These run on the CPU with CPU torch: the GPU half (the pool
really separates segments; IPC of a pool segment) is in docs/validation/run-gpu-next.sh.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from ptxrag.sandbox.gpu import worker  # noqa: E402

JOB: dict[str, Any] = {
    "inputs": [
        {"name": "x", "dtype": "float32", "shape": ["n"], "init": {"kind": "normal"}},
        {"name": "k", "dtype": "int32", "shape": [4], "init": {"kind": "randint", "low": -3, "high": 3}},
    ],
    "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
    "scalars": [],
    "workspace_bytes": 4096,
}


class RecordingCandidate:
    """Stands in for CandidateProcess.prepare: keeps the tensors the worker would share."""

    def __init__(self) -> None:
        self.shared: list[Any] = []

    def prepare(self, inputs: list, outputs: list, scalars: list, workspace: Any) -> int:
        self.shared += [*inputs, *outputs, *([workspace] if workspace is not None else [])]
        return 0


def cpu_exposed() -> worker.ExposedMemory:
    mem = worker.ExposedMemory.__new__(worker.ExposedMemory)
    mem.device, mem.pool, mem.segments = torch.device("cpu"), None, set()
    mem.base_of = lambda p: p  # on the CPU a tensor's storage stands for its allocation
    return mem


@pytest.fixture
def cpu_worker(monkeypatch: pytest.MonkeyPatch) -> worker.Worker:
    monkeypatch.setattr(worker, "torch", torch)
    w = worker.Worker.__new__(worker.Worker)
    w.job, w.device, w.scalars, w.guards = JOB, torch.device("cpu"), {}, []
    w.cand = RecordingCandidate()  # type: ignore[assignment]
    w.exposed = cpu_exposed()
    w.workspace = w.exposed.empty([4096], torch.uint8)
    w.workspace.zero_()
    return w


def _alloc(t: Any) -> int:
    return int(t.untyped_storage().data_ptr())


def test_only_exposed_allocations_reach_the_candidate_and_private_copies_never_do(
    cpu_worker: worker.Worker,
) -> None:
    w = cpu_worker
    dims = {"n": 1000}
    inputs = w.make_inputs(dims, seed=1)
    private = w.private_copy(inputs)
    contents = w.make_inputs(dims, seed=2, guard=False)  # the timing stage's private contents
    outputs = w.make_outputs(dims)
    w.call(inputs, outputs)
    shared = w.cand.shared  # type: ignore[attr-defined]
    assert len(shared) == 4
    exposed = w.exposed.segments
    for t in shared:
        assert _alloc(t) in exposed, "a tensor the candidate maps is not from the exposed pool"
    for t in [*private.values(), *contents.values()]:
        assert _alloc(t) not in exposed, "a private tensor was allocated in the exposed pool"
    assert all(bool((g[1] != 0).any()) for g in w.guards)  # guard bytes filled (outside the pool: randint)


def test_exposed_tensors_are_allocated_inside_the_pool_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "torch", torch)
    state = {"inside": False, "device": None}
    allocated_inside: list[bool] = []

    @contextlib.contextmanager
    def use_mem_pool(pool: Any, device: Any = None):
        state["inside"], state["device"] = True, device
        try:
            yield
        finally:
            state["inside"] = False

    real_empty = torch.empty

    def empty(*a: Any, **k: Any) -> Any:
        allocated_inside.append(state["inside"])
        return real_empty(*a, **{**k, "device": "cpu"})

    monkeypatch.setattr(torch.cuda, "use_mem_pool", use_mem_pool)
    monkeypatch.setattr(torch, "empty", empty)
    mem = cpu_exposed()
    mem.pool = object()
    mem.device = "cuda:0"  # what the pool is asked for
    x = mem.empty([16], torch.uint8)
    assert allocated_inside == [True] and state["device"] == "cuda:0" and _alloc(x) in mem.segments


class FakeDriver:
    """cuMemGetAddressRange_v2 answering allocation base = ptr rounded down to 1 MiB."""

    def cuMemGetAddressRange_v2(self, base: Any, size: Any, ptr: Any) -> int:  # noqa: N802
        base._obj.value = ptr.value & ~((1 << 20) - 1)
        size._obj.value = 1 << 20
        return 0


def test_the_worker_refuses_to_share_an_allocation_outside_the_exposed_pool() -> None:
    proc = worker.CandidateProcess.__new__(worker.CandidateProcess)
    proc.cu = FakeDriver()  # type: ignore[assignment]
    proc.bases = {0x300000: 0x7000000}
    proc.exportable = {0x300000}
    assert proc.remote_ptr(0x300040) == 0x7000040  # mapped before: its offset
    with pytest.raises(worker.HarnessError, match="refused to share allocation 0x500000"):
        proc.remote_ptr(0x500010)
    assert worker.allocation_base(FakeDriver(), 0x5ABCDE) == 0x500000  # type: ignore[arg-type]
    assert ctypes.sizeof(ctypes.c_uint64) == 8


@pytest.mark.gpu
def test_on_the_gpu_private_tensors_never_share_an_exposed_allocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GPU half: tensors of the layout a check makes (guarded inputs and outputs of 4 MiB and 16 KiB, the
    private copies, a float64 reference, gathered samples), allocated after a large exposed buffer was freed
    (the allocator reuses freed blocks), never lie in an allocation the worker would share. The same layout
    from the default pool (as before) is printed for the record: there they did share."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    monkeypatch.setattr(worker, "torch", torch)
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuMemGetAddressRange_v2.argtypes = [
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_uint64,
    ]
    dev = torch.device("cuda", 0)

    def layout(alloc: Any) -> tuple[set[int], list[int]]:
        big = alloc([18 << 20])
        del big  # a freed exposed block, reused below (as check 2 reuses check 1's)
        shared = [alloc([(4 << 20) + (128 << 10)]), alloc([(16 << 10) + (128 << 10)])]
        private = [
            shared[0][: 4 << 20].clone(),
            torch.empty(1 << 19, dtype=torch.float64, device=dev),
            shared[1][:256].index_select(0, torch.arange(64, device=dev)),
        ]
        bases = {worker.allocation_base(cu, t.data_ptr()) for t in shared}
        return bases, [worker.allocation_base(cu, t.data_ptr()) for t in private]

    mem = worker.ExposedMemory(dev, lambda p: worker.allocation_base(cu, p))
    assert mem.pool is not None, "this torch has no torch.cuda.MemPool: the exposed pool is not separate"
    bases, private = layout(lambda shape: mem.empty(shape, torch.uint8))
    assert bases <= mem.segments
    assert not set(private) & mem.segments, "a private tensor lies in an allocation the candidate maps"
    old_bases, old_private = layout(lambda shape: torch.empty(shape, dtype=torch.uint8, device=dev))
    print(
        f"default pool (before): {len(set(old_private) & old_bases)} of 3 private tensors shared an allocation"
    )


@pytest.mark.parametrize("rtol", [1e-3, 0.0])
def test_where_the_reference_is_infinite_only_the_same_infinity_passes(
    monkeypatch: pytest.MonkeyPatch, rtol: float
) -> None:
    """atol + rtol * |inf| is inf (NaN when rtol is 0), and `err > allowed` was then never true: any value,
    NaN poison (unwritten) included, passed wherever the reference was infinite."""
    monkeypatch.setattr(worker, "torch", torch)
    w = worker.Worker.__new__(worker.Worker)
    w.device = torch.device("cpu")
    w.job = {"outputs": [{"name": "y"}], "tolerance": {"atol": 1e-3, "rtol": rtol}}
    inf, nan = float("inf"), float("nan")
    ref = torch.tensor([inf, -inf, 1.0, nan], dtype=torch.float64)
    honest = w.compare("y", torch.tensor([inf, -inf, 1.0, nan]), ref)
    assert honest["passed"], honest
    for bad in ([0.0, -inf, 1.0, nan], [nan, -inf, 1.0, nan], [inf, inf, 1.0, nan], [inf, -inf, 1.0, 2.0]):
        r = w.compare("y", torch.tensor(bad), ref)
        assert not r["passed"] and r["mismatches"] == 1, (bad, r)


# -- processes the candidate leaves behind (class 8: work outside the calling process) --------------------------


def _fake_proc(root: Any, tree: dict[int, list[int]]) -> str:
    for pid, kids in tree.items():
        d = root / str(pid) / "task" / str(pid)
        d.mkdir(parents=True)
        (d / "children").write_text(" ".join(map(str, kids)) + (" " if kids else ""))
    return str(root)


def test_stray_processes_are_a_runners_descendants_and_the_workers_other_children(tmp_path: Any) -> None:
    # worker 100; runners 200 (forked 400, which forked 500) and 300; 600 an orphan adopted by the worker
    proc = _fake_proc(tmp_path, {100: [200, 300, 600], 200: [400], 300: [], 400: [500], 500: [], 600: []})
    assert worker.stray_processes({200, 300}, me=100, proc=proc) == [400, 500, 600]
    assert worker.stray_processes({200, 300, 600}, me=100, proc=proc) == [400, 500]
    clean = _fake_proc(tmp_path / "clean", {100: [200], 200: []})
    assert worker.stray_processes({200}, me=100, proc=clean) == []


def test_a_real_forked_helper_is_found(tmp_path: Any) -> None:
    import subprocess
    import sys

    code = "import os, sys, time\nif os.fork() == 0:\n    time.sleep(30)\nelse:\n    print('ready', flush=True); time.sleep(30)\n"
    runner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "ready"
        helpers = worker.stray_processes(set(), me=runner.pid)
        assert len(helpers) == 1
        assert helpers[0] in worker.stray_processes({runner.pid})
    finally:
        for pid in worker.children_of(runner.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        runner.kill()
        runner.wait()


def test_a_call_that_leaves_a_process_fails_as_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "torch", torch)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)

    class Cand:
        def call(self, k: int, wall: bool, record: bool) -> dict:
            return {"rc": 0, "ms": 1.0}

    class Runners:
        def live_pids(self) -> set[int]:
            return {200}

    w = worker.Worker.__new__(worker.Worker)
    w.cand, w.runners = Cand(), Runners()  # type: ignore[assignment]
    monkeypatch.setattr(worker, "stray_processes", lambda runners: [])
    assert w.run_candidate(0)["ms"] == 1.0
    monkeypatch.setattr(worker, "stray_processes", lambda runners: [4242] if runners == {200} else [])
    with pytest.raises(worker.CandidateViolation, match="left 1 process"):
        w.run_candidate(0)


def test_closing_a_candidate_process_twice_leaves_reused_fds_alone() -> None:
    """The timing stage closes the candidate's process before timing the library (a kernel it left running
    would slow the baseline and, through the worker's baseline cache, every later candidate's speedup); the
    job's end closes it again, by which time its fd numbers may be another pipe's."""
    import subprocess
    import sys

    proc = worker.CandidateProcess.__new__(worker.CandidateProcess)
    cmd_r, proc.cmd_w = os.pipe()
    proc.res_r, res_w = os.pipe()
    proc.proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.closed = False
    proc.close()
    r, w = os.pipe()  # may take the numbers just freed
    try:
        proc.close()
        os.write(w, b"x")
        assert os.read(r, 1) == b"x"
    finally:
        for fd in (r, w, cmd_r, res_w):
            os.close(fd)


# -- the harness's files are out of the candidate's reach -------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox uid needs root")
def test_a_sandbox_uid_cannot_rewrite_or_replace_the_harness_files(tmp_path: Any) -> None:
    """The worker's directory goes to the sandbox uid (the candidate's processes run as it), and everything in
    it went too: runner.py, audit.so and the reference could be rewritten (or unlinked and replaced) by a
    candidate for every later candidate process and job. The harness folder stays the parent's."""
    import shutil
    import subprocess
    import tempfile

    from ptxrag.sandbox.containment import Limits, prepare_workdir
    from ptxrag.sandbox.worker_client import HARNESS_DIR

    base = Path(tempfile.mkdtemp(prefix="ptxrag-harness-test-"))  # pytest's tmp_path is not traversable
    base.chmod(0o755)
    work = base / "work"
    try:
        (work / HARNESS_DIR).mkdir(parents=True)
        (work / HARNESS_DIR).chmod(0o755)
        (work / HARNESS_DIR / "runner.py").write_text("trusted\n")
        (work / "scratch.txt").write_text("the child's\n")
        uid = 64123
        prepare_workdir(work, Limits(uid=uid))
        assert (work / HARNESS_DIR).stat().st_uid == os.geteuid()
        assert (work / HARNESS_DIR / "runner.py").stat().st_uid == os.geteuid()
        assert (work / "scratch.txt").stat().st_uid == uid and work.stat().st_uid == uid
        attack = (
            'h="$1"; ok=""\n'
            '(echo evil > "$h/runner.py") 2>/dev/null && ok="$ok write"\n'
            'mv "$h/runner.py" "$h/../old.py" 2>/dev/null && ok="$ok replace"\n'
            'echo mine > "$h/../scratch.txt"\n'
            'echo "${ok:-none}"\n'
        )
        out = subprocess.run(
            ["/bin/sh", "-c", attack, "sh", str(work / HARNESS_DIR)],
            user=uid,
            group=uid,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == "none", out.stdout
        assert (work / HARNESS_DIR / "runner.py").read_text() == "trusted\n"
        assert (work / "scratch.txt").read_text() == "mine\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_worker_imports_the_reference_before_the_candidate_library_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A candidate's constructors run when its library loads; the reference was imported after that, so a
    constructor could rewrite reference.py (a reference of zeros, a baseline that sleeps)."""
    ref = tmp_path / "reference.py"
    ref.write_text("def reference(inputs, scalars):\n    return 'honest'\n")

    class Cand:
        cu = None

        def load(self, library: str) -> list[str]:
            ref.write_text(
                "def reference(inputs, scalars):\n    return 'forged'\n"
            )  # what a constructor could do
            return []

    class Runners:
        def take(self) -> Cand:
            return Cand()

    class FakeCuda:
        @staticmethod
        def Stream(device: Any = None) -> None:  # noqa: N802
            return None

    monkeypatch.setattr(worker, "torch", torch)
    monkeypatch.setattr(torch, "cuda", FakeCuda)
    monkeypatch.setattr(worker, "ExposedMemory", lambda device, base_of: type("M", (), {"segments": set()})())
    job = {
        "library": "x.so",
        "reference_file": str(ref),
        "reference_function": "reference",
        "baseline_function": "baseline",
        "scalars": [],
    }
    w = worker.Worker(job, Runners())  # type: ignore[arg-type]
    assert w.reference({}, {}) == "honest"


def test_the_profiled_launch_takes_library_and_warm_calls_from_the_evaluator_not_the_writable_job() -> None:
    """launch.json lies in a folder the candidate's process (running while and after it is written) can write:
    {"warm_calls": 0} made the profiled call the process's first (class 4, first-call-only kernels passed
    again) and "library" could name another file."""
    from ptxrag.sandbox.gpu import launch_once

    forged = {"library": "/tmp/other.so", "warm_calls": 0}
    argv = ["launch_once.py", "launch.json", "/work/harness/candidate.so", "2"]
    assert launch_once.launch_params(argv, forged) == ("/work/harness/candidate.so", 2)
    assert launch_once.launch_params(["launch_once.py", "j.json"], forged) == ("/tmp/other.so", 0)


def test_the_execution_stage_puts_the_library_and_warm_calls_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from ptxrag.sandbox import SandboxConfig
    from ptxrag.sandbox.containment import Tracked
    from ptxrag.sandbox.stages import execution
    from ptxrag.tasks import load_task

    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "launch.json").write_text('{"warm_calls": 0, "library": "/tmp/other.so"}')
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: Any) -> tuple[int, Tracked]:
        seen.append(cmd)
        return 1, Tracked()

    monkeypatch.setattr(execution, "find_ncu", lambda: Path("/usr/bin/ncu"))
    monkeypatch.setattr(execution, "run_contained", fake_run)
    warm = set()
    for _ in range(40):
        execution.run_execution(SandboxConfig(), load_task("warp-reduce-redux"), tmp_path)
        *_, script, job, library, n = seen[-1]
        assert script == str(tmp_path / "harness" / "launch_once.py") and job.endswith("launch.json")
        assert library == str(tmp_path / "harness" / "candidate.so")
        warm.add(int(n))
    assert warm <= {1, 2, 3} and len(warm) >= 2


def test_no_candidate_process_outlives_the_checks_and_timing_loads_a_fresh_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checked process (with any thread it started: a thread named like a driver thread passes the thread
    check) stayed alive through the profiled launch and the mutants, free to rewrite the profiler's report in
    the job's folder. It now ends with the checks; timing loads the library into a fresh process."""

    class Proc:
        def __init__(self, name: str) -> None:
            self.name, self.closed, self.loaded, self.exportable = name, False, None, None

        def close(self) -> None:
            self.closed = True

        def load(self, library: str) -> list[str]:
            self.loaded = library
            return []

    class Runners:
        def __init__(self) -> None:
            self.filled, self.n = 0, 0

        def fill(self, n: int) -> None:
            self.filled = n

        def take(self, timeout_s: float | None = None) -> Proc:
            self.n += 1
            return Proc(f"fresh-{self.n}")

    w = worker.Worker.__new__(worker.Worker)
    checked = Proc("checked")
    w.cand = w.main = checked  # type: ignore[assignment]
    w.runners = Runners()  # type: ignore[assignment]
    w.job = {"check_dims": [{"n": 1}, {"n": 2}], "library": "/h/candidate.so"}
    w.exposed = cpu_exposed()
    w.workspace = torch.full((64,), 7, dtype=torch.uint8)  # what the checked process left there
    monkeypatch.setattr(w, "check_once", lambda dims, label, save=None: [{"passed": True}])
    reply = w.correctness({"cmd": "correctness", "save_inputs": None})
    assert reply["ok"] and checked.closed and w.runners.filled == 1  # type: ignore[attr-defined]
    fresh = w.ensure_candidate()
    assert fresh is not checked and fresh.loaded == "/h/candidate.so" and w.main is fresh  # type: ignore[attr-defined]
    assert fresh.exportable is w.exposed.segments  # type: ignore[attr-defined]
    assert int(w.workspace.sum()) == 0  # a fresh process gets a zero-filled workspace, as the first did
    assert w.ensure_candidate() is fresh  # alive: kept


def test_lines_planted_in_a_later_processs_audit_log_are_not_its_violations(tmp_path: Any) -> None:
    """audit-runner-N.log names are predictable and the folder outlives a job in a warm worker: a candidate
    could write 'refused libcublas...' into the log of a process of the next job and fail an honest candidate."""
    from ptxrag.sandbox.gpu import runner

    log = tmp_path / "audit-runner-7.log"
    log.write_text("refused /x/libcublas.so.13\n")  # planted before that process loads its candidate
    r = runner.Runner.__new__(runner.Runner)
    r.audit_log, r.audit_seen = str(log), 0
    r.mark_audit_start()
    assert r.audit_violations() == []
    with open(log, "a") as f:
        f.write("refused /y/libcudnn.so.9\n")  # what the audit writes for this candidate
    assert r.audit_violations() == ["tried to load a forbidden library at run time: libcudnn.so.9 (refused)"]


def test_a_zombie_is_not_a_stray_process(tmp_path: Any) -> None:
    # the last job's leftover, killed by the sweep but not reaped yet, is a zombie child of the worker: it
    # does no work, and counting it failed the next job's honest candidate (H200, 2026-12-05)
    proc = _fake_proc(tmp_path, {100: [200, 600, 700], 200: [], 600: [], 700: []})
    (tmp_path / "600" / "stat").write_text("600 (sleep 613) Z 1 600 600 0 -1")
    (tmp_path / "700" / "stat").write_text("700 (a b) c) S 1 700 700 0 -1")  # a ')' in the name
    assert worker.ended(600, proc) and not worker.ended(700, proc) and not worker.ended(800, proc)
    assert worker.stray_processes({200}, me=100, proc=proc) == [700]


def test_a_real_unreaped_child_is_ended_and_reaped() -> None:
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 60
    while not worker.ended(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.ended(child.pid)
    assert child.pid not in worker.stray_processes(set())
    worker.reap_orphans()
    assert child.pid not in worker.children_of(os.getpid())
    child.returncode = 0  # reaped above: Popen must not wait for it again
