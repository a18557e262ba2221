"""The candidate process's process-creation filter (ptxrag/sandbox/gpu/nospawn.py), run in a plain Python
process: after it, threads still start, every way of creating a process or running a program kills the
process with SIGSYS, and clone3 is refused (ENOSYS) so that glibc falls back to a clone the filter reads.
No GPU needed: the GPU runs (controls/reaped_helper.cu, profiled_helper.cu, every reference with the filter)
are PART=9 and PART=10 of docs/validation/run-gpu-next.sh (docs/validation/2026-12-05-s10-gpu.txt)."""

from __future__ import annotations

import ctypes.util
import platform
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ptxrag.sandbox.config import SandboxConfig
from ptxrag.sandbox.worker_client import WORKER_FILES, child_env

GPU_DIR = Path(__file__).resolve().parents[1] / "ptxrag" / "sandbox" / "gpu"
HAS_SECCOMP = ctypes.util.find_library("seccomp") is not None and sys.platform == "linux"

PROGRAM = """
import ctypes, os, subprocess, sys, threading
sys.path.insert(0, {gpu!r})
import nospawn
nospawn.forbid_process_creation()
done = []
t = threading.Thread(target=lambda: done.append(1))
t.start(); t.join()
assert done == [1]
print("thread ok", flush=True)
how = sys.argv[1]
if how == "fork":
    os.fork()
elif how == "subprocess":
    subprocess.run(["true"])
elif how == "exec":
    os.execv("/bin/true", ["true"])
elif how == "posix_spawn":
    os.posix_spawn("/bin/true", ["true"], {{}})
elif how == "system":
    os.system("true")
elif how == "clone3":
    libc = ctypes.CDLL(None, use_errno=True)
    args = (ctypes.c_uint64 * 11)()  # struct clone_args, flags 0, exit signal 0
    rc = libc.syscall(435, ctypes.byref(args), ctypes.sizeof(args))
    print("clone3", rc, ctypes.get_errno(), flush=True)
print("survived", how, flush=True)
"""


def _run(how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM.format(gpu=str(GPU_DIR)), how],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(not HAS_SECCOMP, reason="needs Linux with libseccomp")
@pytest.mark.parametrize("how", ["fork", "subprocess", "exec", "posix_spawn", "system"])
def test_creating_a_process_kills_the_confined_process(how: str) -> None:
    got = _run(how)
    assert "thread ok" in got.stdout, got.stderr
    assert got.returncode == -signal.SIGSYS, (got.returncode, got.stdout, got.stderr)
    assert "survived" not in got.stdout


@pytest.mark.skipif(not HAS_SECCOMP, reason="needs Linux with libseccomp")
def test_threads_and_ordinary_work_go_on() -> None:
    got = _run("nothing")
    assert got.returncode == 0 and "survived nothing" in got.stdout, got.stderr


@pytest.mark.skipif(
    not HAS_SECCOMP or platform.machine() != "x86_64", reason="clone3's number is x86_64's here"
)
def test_clone3_is_refused_so_glibc_falls_back_to_clone() -> None:
    got = _run("clone3")
    assert got.returncode == 0, got.stderr
    assert "clone3 -1 38" in got.stdout  # ENOSYS


def test_the_filter_is_on_by_default_and_travels_with_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "nospawn.py" in WORKER_FILES and (GPU_DIR / "nospawn.py").is_file()
    monkeypatch.delenv("PTXRAG_SANDBOX_NO_SPAWN", raising=False)
    assert SandboxConfig().forbid_process_creation
    monkeypatch.setenv("PTXRAG_SANDBOX_NO_SPAWN", "0")
    assert not SandboxConfig().forbid_process_creation
    assert "PTXRAG_SANDBOX_NO_SPAWN" not in child_env(SandboxConfig(forbid_process_creation=False), tmp_path)
    env = child_env(SandboxConfig(forbid_process_creation=True), tmp_path)
    assert env["PTXRAG_SANDBOX_NO_SPAWN"] == "1"


@pytest.mark.parametrize("flag", ["1", None])
def test_the_profiled_launch_confines_itself_before_the_candidate_loads(
    flag: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """launch_once.py (the process Nsight Compute profiles) installs the filter after the CUDA context and
    before the candidate's library loads, when the evaluator's environment asks for it."""
    from ptxrag.sandbox.gpu import launch_once

    order: list[str] = []

    class FakeRuntime:
        def __getattr__(self, name: str):  # every CUDA runtime call succeeds
            return lambda *a: order.append(name) or 0

    def load(library: str):
        order.append(f"load {library}")
        return None, lambda *a: 7  # the call fails: main stops there

    monkeypatch.setattr(launch_once.abi, "find_cudart", lambda: "libcudart.so")
    monkeypatch.setattr(launch_once.ctypes, "CDLL", lambda *a, **k: FakeRuntime())
    monkeypatch.setattr(launch_once.abi, "load_candidate", load)
    monkeypatch.setattr(launch_once.nospawn, "forbid_process_creation", lambda: order.append("filter"))
    if flag:
        monkeypatch.setenv("PTXRAG_SANDBOX_NO_SPAWN", flag)
    else:
        monkeypatch.delenv("PTXRAG_SANDBOX_NO_SPAWN", raising=False)
    job = tmp_path / "launch.json"
    job.write_text('{"tensors": [], "library": "forged.so", "warm_calls": 0}')
    assert launch_once.main(["launch_once.py", str(job), "candidate.so", "1"]) == 5
    loaded = order.index("load candidate.so")
    if flag:
        assert order.index("cudaFree") < order.index("filter") < loaded
    else:
        assert "filter" not in order


def test_a_filter_that_cannot_be_installed_stops_the_profiled_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptxrag.sandbox.gpu import launch_once

    loaded: list[str] = []

    class FakeRuntime:
        def __getattr__(self, name: str):
            return lambda *a: 0

    def refuse() -> None:
        raise OSError("libseccomp.so.2: cannot open shared object file")

    monkeypatch.setattr(launch_once.abi, "find_cudart", lambda: "libcudart.so")
    monkeypatch.setattr(launch_once.ctypes, "CDLL", lambda *a, **k: FakeRuntime())
    monkeypatch.setattr(launch_once.abi, "load_candidate", lambda lib: loaded.append(lib))
    monkeypatch.setattr(launch_once.nospawn, "forbid_process_creation", refuse)
    monkeypatch.setenv("PTXRAG_SANDBOX_NO_SPAWN", "1")
    job = tmp_path / "launch.json"
    job.write_text('{"tensors": []}')
    assert launch_once.main(["launch_once.py", str(job), "candidate.so", "1"]) == 6
    assert loaded == []  # the candidate never ran unconfined
