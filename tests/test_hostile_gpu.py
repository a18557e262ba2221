"""Hostile candidates through the sandbox service on a real GPU (the lent H200): each is contained and reported
while the service keeps serving, and an honest kernel submitted after them still succeeds."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs fastapi, uvicorn and tenacity on the GPU box")
pytest.importorskip("uvicorn")
pytest.importorskip("tenacity")

from ptxrag.sandbox.containment import _is_zombie  # noqa: E402
from ptxrag.sandbox.service import ServiceClient  # noqa: E402
from ptxrag.tasks import load_task  # noqa: E402

pytestmark = pytest.mark.gpu

TASK = load_task("warp-reduce-redux")
HEAD = '#include "ptxrag_abi.h"\n#include <cstdio>\n#include <cstdlib>\n#include <unistd.h>\n#include <signal.h>\n'
KERNEL = (
    "__global__ void k(const int* x, int* y, long long rows) {"
    ' int s; asm volatile("redux.sync.add.s32 %0, %1, 0xffffffff;" : "=r"(s) : "r"(x[threadIdx.x]));'
    " if (threadIdx.x == 0 && blockIdx.x < rows) y[blockIdx.x] = s; }\n"
)


def _cand(body: str, kernel: str = KERNEL) -> str:
    return HEAD + kernel + 'extern "C" int ptxrag_launch(const ptxrag_args* a) {\n' + body + "\n}\n"


LAUNCH = "k<<<1, 32, 0, a->stream>>>((const int*)a->inputs[0].data, (int*)a->outputs[0].data, a->inputs[0].shape[0]);"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    state = tmp_path_factory.mktemp("svc")
    token_file = state / "token"
    token_file.write_text("hostile-test-token")
    token_file.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptxrag", "sandbox", "serve", "--port", str(port), "--state-dir", str(state),
         "--token-file", str(token_file), "--stage-timeout", "20", "--workers", "2"],
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    yield ServiceClient(url, token="hostile-test-token"), token_file
    os.killpg(proc.pid, 9)
    proc.wait()


CASES = {
    "kernel-never-ends": (
        # returns normally: the kernel spins on the GPU and the synchronising check waits for it
        _cand(LAUNCH + " return 0;", KERNEL.replace("int s;", "while (x[0] != 0x7fffffff) {} int s;")),
        "did not finish",
    ),
    "host-infinite-loop": (_cand("volatile int s = 1; while (s) {} return 0;"), "did not finish"),
    "segfault": (_cand("return *(volatile int*)0;"), "SIGSEGV"),
    # RLIMIT_NPROC of the sandbox uid caps it (fork fails, every copy spins): stopped at the deadline, or by the
    # watchdog's process count when the cap is above the watchdog's
    # the process-creation filter (on by default) kills it at the first fork; without it, the process limit
    "fork-bomb": (
        _cand("for (;;) fork(); return 0;"),
        ("tried to create a process", "did not finish", "fork bomb"),
    ),
    "host-memory": (
        _cand(
            "for (;;) { volatile char* p = (volatile char*)malloc(1 << 30);"
            " if (!p) return 9; for (long i = 0; i < (1L << 30); i += 4096) p[i] = 1; } return 0;"
        ),
        "",
    ),
    "all-gpu-memory": (
        _cand(
            "void* p; size_t n = 0; while (cudaMalloc(&p, 1ull << 30) == cudaSuccess) ++n;"
            " cudaGetLastError(); return 2; /* cudaErrorMemoryAllocation */"
        ),
        "cudaErrorMemoryAllocation",
    ),
    "kill-parent": (_cand("kill(getppid(), 9); kill(1, 9); " + LAUNCH + " return 0;"), ""),
    "background-process": (
        _cand("if (fork() == 0) { setsid(); sleep(600); _exit(0); } " + LAUNCH + " return 0;"),
        "",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_candidate_is_contained_and_the_service_keeps_serving(service, case):
    client, _ = service
    source, expect = CASES[case]
    rep = client.evaluate(TASK, source, run_timing=False)
    print(case, "->", rep.feedback().replace("\n", " | ")[:600])
    assert not rep.success
    if expect:
        alternatives = (expect,) if isinstance(expect, str) else expect
        assert any(e in rep.feedback() for e in alternatives), rep.feedback()
    assert client.metrics()["running"] <= 2
    assert not _left_behind(), "a process of the job outlived it"


SANDBOX_UIDS = (64000, 64001)  # the service's --workers 2 from its default uid base


def _proc(pid: str) -> dict | None:
    """uid, argv, parent and session of a live process; None if gone or a zombie."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        uid = os.stat(f"/proc/{pid}").st_uid
        if _is_zombie(int(pid)):
            return None
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 2 :].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        maps = Path(f"/proc/{pid}/maps").read_text()
        return {"uid": uid, "argv": [a.decode(errors="replace") for a in argv if a], "ppid": fields[1],
                "sid": fields[3], "maps": maps}  # fmt: skip
    return None


def _script(info: dict) -> str:
    return os.path.basename(info["argv"][1]) if len(info["argv"]) > 1 else ""


def _left_behind() -> list[str]:
    """Processes of a sandbox uid that a finished job left. The service keeps one warm sandbox per uid
    between jobs, so two kinds may stay, and only these: the uid's GPU worker (worker.py, started by the
    service, one per uid) and the idle spare candidate processes it started after sweeping the job (runner.py,
    its child, in its session, with no candidate or mutant library mapped). A candidate's own process, a
    fork of it (it maps the candidate), anything it exec'd or moved to a session of its own is reported.
    (A leftover that exec'd runner.py without setsid would pass this check; the sweep that removes it is
    tested on the CPU, tests/test_containment.py.)"""
    procs = {
        p: i for p in os.listdir("/proc") if p.isdigit() and (i := _proc(p)) and i["uid"] in SANDBOX_UIDS
    }
    workers = {p: i for p, i in procs.items() if _script(i) == "worker.py" and i["ppid"] not in procs}
    bad = [f"{p} {i['argv']}" for p, i in procs.items() if p not in workers and not (
        _script(i) == "runner.py"
        and i["ppid"] in workers
        and workers[i["ppid"]]["uid"] == i["uid"]
        and workers[i["ppid"]]["sid"] == i["sid"]
        and "candidate.so" not in i["maps"]
        and "/mutant-" not in i["maps"]
    )]  # fmt: skip
    per_uid = [i["uid"] for i in workers.values()]
    bad += [f"uid {u}: {per_uid.count(u)} GPU workers" for u in set(per_uid) if per_uid.count(u) > 1]
    return bad


def test_secret_file_and_network_and_writes_outside_are_denied(service, tmp_path):
    client, token_file = service
    outside = tmp_path / "written-by-candidate"
    src = _cand(
        f'FILE* f = fopen("{token_file}", "r"); fprintf(stderr, f ? "LEAKED\\n" : "token unreadable\\n");'
        f' FILE* g = fopen("{outside}", "w"); fprintf(stderr, g ? "WROTE\\n" : "write denied\\n");'
        " int s = socket(2, 1, 0); struct { unsigned short f, p; unsigned a; char z[8]; } sa = {2, 0x5000, 0x0100007f, {0}};"
        ' fprintf(stderr, connect(s, (const struct sockaddr*)&sa, sizeof sa) == 0 ? "NET\\n" : "no network\\n");'
        + LAUNCH
        + " return 0;",
    ).replace(HEAD, HEAD + "#include <sys/socket.h>\n")
    rep = client.evaluate(TASK, src, run_timing=False)
    out = rep.correctness.stdout_tail
    print(out)
    assert "token unreadable" in out and "write denied" in out and "no network" in out
    assert "LEAKED" not in out and "WROTE" not in out and not outside.exists()


def test_honest_kernel_after_the_hostile_ones_succeeds(service):
    client, _ = service
    rep = client.evaluate(TASK, TASK.solution_source())
    print(rep.feedback())
    assert rep.success
    m = client.metrics()
    print(m)
    assert m["gpus"][0]["busy_s"] > 0 and m["isolated"] is True
