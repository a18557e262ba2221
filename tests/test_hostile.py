"""Hostile candidates, host side (CPU): each is contained and reported, and the next run is normal.

The candidates are compiled .cu files whose ptxrag_launch misbehaves on the host; tests/helpers/call_host.py
loads and calls them inside the same containment the GPU worker gets (isolated limits: a dedicated uid, an empty
network namespace). Needs root (CI and the GPU box run as root). The GPU-side cases (a kernel that never ends,
a kernel that takes all GPU memory) run on the H200: docs/validation/.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ptxrag.sandbox.compile import compile_candidate
from ptxrag.sandbox.containment import Limits, _is_zombie, clean_env, describe_exit, run_contained

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="isolation (dedicated uid, netns) needs root")

HELPER_C = Path(__file__).parent / "helpers" / "call_host.c"
GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
HEAD = '#include "ptxrag_abi.h"\n#include <cstdio>\n#include <cstdlib>\n#include <unistd.h>\n#include <signal.h>\n'


@pytest.fixture(scope="module")
def launcher(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("launcher") / "call_host"
    subprocess.run([cc, "-O1", "-o", str(out), str(HELPER_C), "-ldl"], check=True)
    return out


def _launch(body: str) -> str:
    return HEAD + 'extern "C" int ptxrag_launch(const ptxrag_args* a) {\n' + body + "\n}\n"


@pytest.fixture
def run(launcher):
    made: list[Path] = []

    def _run(source: str, timeout_s: float = 20, limits: Limits | None = None):
        lib = compile_candidate(source, GENCODE)
        assert lib.ok, lib.log
        # like the evaluator: a fresh directory in /tmp holding everything the child needs
        work = Path(tempfile.mkdtemp(prefix="ptxrag-hostile-"))
        made.append(work)
        shutil.copy2(launcher, work / "call_host")
        shutil.copy2(lib.library_path, work / "candidate.so")
        rc, tr = run_contained(
            [str(work / "call_host"), str(work / "candidate.so")],
            cwd=work, env=clean_env(work), limits=limits or Limits.isolated(64000), timeout_s=timeout_s,
            stdout_path=work / "out.log",
        )  # fmt: skip
        return rc, tr, (work / "out.log").read_text(errors="replace")

    yield _run
    for w in made:
        shutil.rmtree(w, ignore_errors=True)


def _uid_procs(uid: int = 64000) -> list[str]:
    """Live processes of the sandbox uid (zombies hold nothing and cannot be killed)."""
    live = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and p.stat().st_uid == uid and not _is_zombie(int(p.name)):
                live.append(p.name)
        except OSError:
            continue
    return live


def _next_run_is_normal(run) -> None:
    rc, tr, out = run(_launch("return 3;"))
    assert rc == 0 and tr.killed_reason is None and "rc 3" in out, (rc, tr, out)


def test_reading_a_secret_outside_its_directory_is_denied(run, tmp_path):
    secret = tmp_path / "service-token"
    secret.write_text("s3cret-token")
    secret.chmod(0o600)
    rc, tr, out = run(_launch(
        f'FILE* f = fopen("{secret}", "r"); if (!f) {{ perror("open token"); return 1; }}'
        ' char b[64] = {0}; fread(b, 1, 63, f); printf("LEAK %s\\n", b); return 0;'))  # fmt: skip
    assert "LEAK" not in out and "Permission denied" in out
    _next_run_is_normal(run)


def test_network_is_unreachable(run, tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    got: list[bytes] = []
    srv.settimeout(15)
    done = b"test-done"  # the test's own last connection: the listener stops at it, not at a timeout

    def accept() -> None:
        while True:  # connections are accepted in arrival order, so the candidate's would come first
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(100)
            if data == done:
                return
            got.append(data)

    t = threading.Thread(target=accept)
    t.start()
    rc, tr, out = run(_launch(
        '#define S(x) x\n'
        ' int s = socket(2, 1, 0); struct { unsigned short f; unsigned short p; unsigned a; char z[8]; } sa = {2, '
        f'(unsigned short)((({port}) >> 8) | ((({port}) & 255) << 8)), 0x0100007f, {{0}}}};'
        ' if (connect(s, (const struct sockaddr*)&sa, sizeof sa) != 0) { perror("connect"); return 1; }'
        ' write(s, "hello", 5); printf("CONNECTED\\n"); return 0;').replace(
            HEAD, HEAD + "#include <sys/socket.h>\n"))  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=15) as last:  # ends the listener (closing
        last.sendall(done)  # the socket left it waiting out its 15 s timeout)
    t.join()
    srv.close()
    assert "CONNECTED" not in out and got == []
    assert "unreachable" in out.lower() or "connect" in out


def test_writing_outside_its_directory_is_denied(run, tmp_path):
    target = tmp_path / "outside.txt"
    rc, tr, out = run(_launch(
        f'FILE* f = fopen("{target}", "w"); if (!f) {{ perror("write outside"); return 1; }} fputs("x", f); fclose(f);'
        ' return 0;'))  # fmt: skip
    assert not target.exists() and "Permission denied" in out


def test_killing_its_parent_fails(run, tmp_path):
    rc, tr, out = run(_launch('if (kill(getppid(), 9) != 0) { perror("kill parent"); } return 0;'))
    assert "Operation not permitted" in out and rc == 0


def test_fork_bomb_is_capped_and_cleaned(run, tmp_path):
    # 3 s, not 10: the bomb reaches its cap within milliseconds (peak_procs below shows it forked, and that
    # RLIMIT_NPROC held it at 40: past that the watchdog would have killed it for the count)
    rc, tr, out = run(_launch("for (;;) fork(); return 0;"), timeout_s=3,
                       limits=dataclasses.replace(Limits.isolated(64000), max_procs=40))  # fmt: skip
    assert rc is None and tr.killed_reason
    assert 1 < tr.peak_procs <= 40, (tr.peak_procs, tr.killed_reason)
    time.sleep(0.2)
    assert not _uid_procs()
    _next_run_is_normal(run)


def test_background_process_is_killed_with_its_uid(run, tmp_path):
    rc, tr, out = run(_launch(
        'if (fork() == 0) { setsid(); if (fork() == 0) { sleep(120); _exit(0); } _exit(0); } return 0;'))  # fmt: skip
    assert rc == 0
    time.sleep(0.2)
    assert not _uid_procs()


def test_host_memory_hog_is_stopped(run, tmp_path):
    rc, tr, out = run(_launch(
        "for (;;) { volatile char* p = (volatile char*)malloc(64 << 20); if (!p) return 9;"
        " for (long i = 0; i < (64 << 20); i += 4096) p[i] = 1; }"
        " return 0;"), limits=dataclasses.replace(Limits.isolated(64000), memory_bytes=768 << 20))  # fmt: skip
    assert rc is None and "MiB of host memory" in tr.killed_reason, (rc, tr.peak_rss_bytes, out)


def test_segfault_and_host_hang_are_reported(run, tmp_path):
    rc, tr, _ = run(_launch("return *(volatile int*)0;"))
    assert "SIGSEGV" in describe_exit(rc)
    rc, tr, _ = run(_launch("volatile int s = 1; while (s) {} return 0;"), timeout_s=3)
    assert rc is None and "did not finish" in tr.killed_reason
    _next_run_is_normal(run)


def test_a_second_child_of_the_same_uid_leaves_the_first_alive(tmp_path):
    """The evaluator runs the ncu launch as the GPU worker's uid while the worker waits for the timing stage:
    ending the ncu child must not sweep the uid (that killed the worker on the H200), the worker's own close must."""
    from ptxrag.sandbox.containment import Contained

    lim = Limits.isolated(64000)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    first = Contained(["sleep", "60"], cwd=tmp_path / "a", env=clean_env(tmp_path / "a"), limits=lim,
                      stdout_path=tmp_path / "a" / "out.log")  # fmt: skip
    try:
        rc, _ = run_contained(["true"], cwd=tmp_path / "b", env=clean_env(tmp_path / "b"), limits=lim,
                              timeout_s=10, stdout_path=tmp_path / "b" / "out.log", sweep_uid=False)  # fmt: skip
        assert rc == 0
        time.sleep(0.1)
        assert first.proc.poll() is None, "the sibling's cleanup killed the first child"
        rc, _ = run_contained(["true"], cwd=tmp_path / "b", env=clean_env(tmp_path / "b"), limits=lim,
                              timeout_s=10, stdout_path=tmp_path / "b" / "out.log")  # fmt: skip
        first.proc.wait(timeout=5)  # the default sweep does kill every process of the uid
        assert first.proc.returncode == -9
    finally:
        first.close()
    assert not _uid_procs()
