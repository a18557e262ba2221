"""The compile stage reads untrusted source: hostile inputs are refused or contained (issue 16).

Each test is an attack that must fail: includes and assembler directives that read files outside the allowed
roots, a preprocessor bomb, terminal escape codes in the log. The mechanism tests (a compiler that cannot see
a file even when the source check is evaded, no network, no environment) need root, as in CI and on the GPU box.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from ptxrag.sandbox.compile import (
    COMPILE_UID_BASE,
    CompileLimits,
    _contained_limits,
    check_source_paths,
    compile_candidate,
    compile_env,
    read_log,
    scrub_log,
)
from ptxrag.sandbox.containment import run_contained, user_namespaces_available
from ptxrag.sandbox.mutation import build_mutants
from ptxrag.sandbox.toolchain import toolchain

GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
SECRET = "PTXRAG-SECRET-7f3a9c"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the compile isolation (uid, namespaces) needs root")

MINIMAL = r"""
#include "ptxrag_abi.h"
__global__ void k(float* y) { y[threadIdx.x] = 1.f; }
extern "C" int ptxrag_launch(const ptxrag_args* a) {
  k<<<1, 32, 0, a->stream>>>((float*)a->outputs[0].data);
  return (int)cudaGetLastError();
}
"""


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside every allowed root, readable by root only (like the service's token file)."""
    p = tmp_path / "secret.h"
    p.write_text(f"{SECRET}\n")
    p.chmod(0o600)
    return p


def _refused(source: str) -> str:
    res = compile_candidate(source, GENCODE, use_cache=False)
    assert res.status == "failed", res
    assert res.message.startswith("refused before compiling"), res.message
    assert SECRET not in res.message + res.log
    assert res.library_path is None
    return res.message


# -- refused before compiling -------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/etc/shadow", "SECRET"])
def test_include_of_an_absolute_path_is_refused_before_compiling(secret: Path, path: str) -> None:
    name = str(secret) if path == "SECRET" else path
    msg = _refused(f'#include "{name}"\n' + MINIMAL)
    assert name in msg and "outside the allowed include roots" in msg


@pytest.mark.parametrize(
    "directive",
    [
        '#include "../../../../../../../../{p}"',
        "#include <../../../../../../../../{p}>",
        '#include_next "/{p}"',
    ],
)
def test_include_that_climbs_out_with_dotdot_is_refused(secret: Path, directive: str) -> None:
    rel = str(secret).lstrip("/")
    _refused(directive.format(p=rel) + "\n" + MINIMAL)


@pytest.mark.parametrize(
    "spelling",
    [
        '#define P "{p}"\n#include P',  # a computed include cannot be checked
        '#inc\\\nlude "{p}"',  # a line splice inside the directive
        '%:include "{p}"',  # the digraph of #
        '# /* comment */ include "{p}"',
        '#embed "{p}"',
    ],
)
def test_disguised_includes_are_refused(secret: Path, spelling: str) -> None:
    _refused(spelling.format(p=secret) + "\n" + MINIMAL)


@pytest.mark.parametrize(
    "asm",
    [
        'asm(".incbin \\"{p}\\"");',  # host asm at file scope
        'asm(".inc" "bin \\"{p}\\"");',  # split into two literals joined by the compiler
        '__asm__ __volatile__(".include \\"{p}\\"");',
        'asm("nop //"); asm(".incbin \\"{p}\\"");',  # a // inside a string is not a comment
    ],
)
def test_assembler_directives_that_read_files_are_refused(secret: Path, asm: str) -> None:
    msg = _refused(MINIMAL + asm.format(p=secret) + "\n")
    assert ".incbin" in msg or ".include" in msg


def test_the_check_lets_ordinary_sources_through() -> None:
    roots = [Path("/usr/include")]
    ordinary = (
        '#include "ptxrag_abi.h"\n#include <cuda/barrier>\n#include "ptx/tma.cuh"\n#include "a/../b.h"\n'
        '// .incbin in a comment is harmless\n/* #include "/etc/shadow" */\nconst char* s = "x // y";\n'
    )
    assert check_source_paths(ordinary, roots) is None
    assert check_source_paths('#include "/usr/include/stdio.h"\n', roots) is None


# -- the mechanism: what the compiler can reach ---------------------------------------------------------
@as_root
def test_the_compiler_cannot_see_files_outside_its_roots(secret: Path) -> None:
    # __has_include is not an include: the source check lets it through, so only the mount namespace answers
    probe = (
        f'#if __has_include("{secret}") || __has_include("/etc/passwd") || __has_include("{Path.cwd()}/README.md")\n'
        '#error "the compiler can see files outside its roots"\n#endif\n'
        '#if !__has_include("ptxrag_abi.h") || !__has_include(<cuda_runtime.h>)\n#error "headers missing"\n#endif\n'
    )
    res = compile_candidate(probe + MINIMAL, GENCODE, use_cache=False)
    assert res.status == "passed", res.log


@as_root
def test_an_incbin_that_evades_the_scan_reads_nothing() -> None:
    # token pasting builds the directive after the scan; the assembler then finds no such file. The file is
    # readable by anyone: the compile uid alone would not stop it, the private mount namespace does
    folder = Path(tempfile.mkdtemp(prefix="ptxrag-test-world-"))
    folder.chmod(0o755)
    world = folder / "world.bin"
    world.write_text(SECRET)
    world.chmod(0o644)
    evasive = (
        MINIMAL
        + "#define CAT(a, b) a##b\n#define STR(x) XSTR(x)\n#define XSTR(x) #x\n"
        + f'asm(STR(.CAT(inc, bin)) " \\"{world}\\"");\n'
    )
    assert check_source_paths(evasive, []) is None  # the scan is evaded: this tests the mechanism
    res = compile_candidate(evasive, GENCODE, use_cache=False)
    assert res.status == "failed", res
    assert SECRET not in res.log + res.message
    shutil.rmtree(folder)


@as_root
def test_compiler_runs_as_its_uid_without_network_or_secrets(tmp_path: Path, monkeypatch) -> None:
    # the very limits, environment and namespaces nvcc gets, given to a probe instead of nvcc
    monkeypatch.setenv("PTXRAG_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    work = tmp_path / "work"
    work.mkdir()
    uid = COMPILE_UID_BASE + 999
    listener = socket.create_server(("127.0.0.1", 0))  # reachable from any process in our namespace
    port = listener.getsockname()[1]
    probe = (
        "import os, socket\n"
        "print('uid', os.getuid())\n"
        "print('env', sorted(os.environ.items()))\n"
        "print('etc', os.path.exists('/etc/passwd'), os.path.exists('/etc/shadow'), os.path.exists('/root'))\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('net yes')\n"
        "except OSError as e:\n    print('net no', e)\n"
    )
    (work / "probe.py").write_text(probe)
    limits = _contained_limits(CompileLimits(), 60, uid, toolchain())
    log = tmp_path / "out.txt"
    rc, _ = run_contained(
        ["/usr/bin/python3", "-I", str(work / "probe.py")],
        cwd=work,
        env=compile_env(work),
        limits=limits,
        timeout_s=60,
        stdout_path=log,
    )
    listener.close()
    out = log.read_text()
    assert rc == 0, out
    assert f"uid {uid}" in out
    assert SECRET not in out and "TOKEN" not in out
    assert "etc False False False" in out
    assert "net no" in out


@as_root
def test_compiler_process_count_is_capped(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    limits = _contained_limits(CompileLimits(max_procs=8), 60, COMPILE_UID_BASE + 998, toolchain())
    rc, tracked = run_contained(
        ["/bin/sh", "-c", "for i in $(seq 64); do sleep 30 & done; wait"],
        cwd=work,
        env=compile_env(work),
        limits=limits,
        timeout_s=60,
        stdout_path=tmp_path / "out.txt",
    )
    # RLIMIT_NPROC refuses the 9th fork, or the watchdog kills the session: either way it does not get 64
    out = (tmp_path / "out.txt").read_text()
    assert rc != 0, out
    assert tracked.peak_procs <= 9


def test_preprocessor_bomb_fails_fast_at_the_memory_limit() -> None:
    # bounded: 8^8 tokens, about 1.7 GB in the preprocessor; the cap stops it long before, at any speed
    bomb = (
        "#define A1(x) x x x x x x x x\n#define A2(x) A1(A1(x))\n#define A3(x) A2(A2(x))\n"
        "#define A4(x) A3(A3(x))\nint v = 0 A4(+1);\n"
    )
    limits = CompileLimits(memory_bytes=256 << 20)
    ok = compile_candidate(MINIMAL, GENCODE, use_cache=False, limits=limits)
    assert ok.status == "passed", ok.log  # the cap leaves room for an ordinary compile
    res = compile_candidate(bomb + MINIMAL, GENCODE, use_cache=False, limits=limits, timeout_s=170)
    assert res.status == "failed"
    assert res.message.startswith("compiler exceeded its memory limit"), res.message


# -- logs -------------------------------------------------------------------------------------------------
def test_compile_log_has_no_terminal_escape_codes() -> None:
    hostile = '#error "\\x1b[2J\\x1b]0;owned\\x07 clear screen"\n' + MINIMAL
    raw = hostile.replace("\\x1b", "\x1b").replace("\\x07", "\x07")
    res = compile_candidate(raw, GENCODE, use_cache=False)
    assert res.status == "failed"
    # the error is there, its escape codes are not
    assert "clear screen" in res.log and "clear screen" in res.message
    for bad in ("\x1b", "\x07", "\x9b"):
        assert bad not in res.log and bad not in res.message


def test_log_read_back_is_bounded_and_scrubbed(tmp_path: Path) -> None:
    big = tmp_path / "compile.log"
    big.write_bytes(b"\x1b[31merror\x1b[0m: x\r\n" * 500_000)  # 9 MB
    text = read_log(big, 64 << 10)
    assert len(text) < (64 << 10) + 100 and text.endswith("cut at 65536 bytes)")
    assert "\x1b" not in text and "\r" not in text and "error: x\n" in text
    assert scrub_log("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b\x00\x9b2Jc") == "alinkbc"


def test_compile_log_of_a_flood_of_warnings_stays_small() -> None:
    flood = "".join(f'#warning "{"w" * 200} {i}"\n' for i in range(3000)) + MINIMAL.replace("1.f;", "1.f +;")
    res = compile_candidate(flood, GENCODE, use_cache=False, limits=CompileLimits(log_bytes=256 << 10))
    assert res.status == "failed"
    assert len(res.log) <= 4100 and len(res.message) <= 330


NOBODY_SCRIPT = r"""
import importlib.util, json, sys, tempfile
from pathlib import Path
spec = importlib.util.spec_from_file_location("containment", sys.argv[1])
c = importlib.util.module_from_spec(spec)
sys.modules["containment"] = c
spec.loader.exec_module(c)  # stdlib only: runs under the system Python, as nobody
cfg = json.loads(sys.argv[2])
assert c.user_namespaces_available(), "no unprivileged user namespaces here"
for jail in (True, False):
    work = Path(tempfile.mkdtemp())
    (work / "candidate.cu").write_text(cfg["source"])
    lim = c.Limits(isolate_network=jail, read_roots=tuple(cfg["roots"]) if jail else None)
    rc, _ = c.run_contained(
        [cfg["nvcc"], *cfg["flags"], "-o", str(work / "candidate.so"), str(work / "candidate.cu")],
        cwd=work, env={"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work)}, limits=lim,
        timeout_s=170, stdout_path=work / "log",
    )
    print("jail" if jail else "plain", rc, (work / "log").read_text()[-300:].replace("\n", " "))
"""


@as_root
def test_without_root_the_compiler_is_jailed_in_a_user_namespace(tmp_path: Path) -> None:
    # a non-root caller gets the same private root and empty network through a user namespace; run as nobody
    # with the system Python (the project's interpreter may sit under /root), the nvcc command of the stage
    from ptxrag.sandbox.compile import compile_flags, compile_read_roots

    setpriv = shutil.which("setpriv")
    if setpriv is None or not Path("/usr/bin/python3").is_file():
        pytest.skip("needs setpriv and /usr/bin/python3 to run as nobody")
    tc = toolchain()
    home = Path(tempfile.mkdtemp(prefix="ptxrag-nobody-"))
    os.chown(home, 65534, 65534)
    probe = f'#if __has_include("/etc/passwd") || __has_include("{Path.cwd()}/README.md")\n#error "visible"\n#endif\n'
    cfg = {
        "source": probe + MINIMAL,
        "nvcc": str(tc.nvcc),
        "flags": compile_flags(GENCODE, tc.extra_flags),
        "roots": list(compile_read_roots(tc)),
    }
    containment = Path(__file__).resolve().parent.parent / "ptxrag" / "sandbox" / "containment.py"
    (home / "nobody.py").write_text(NOBODY_SCRIPT)
    done = subprocess.run(
        [
            setpriv,
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-I",
            str(home / "nobody.py"),
            str(containment),
            json.dumps(cfg),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home)},
        cwd=home,
    )
    shutil.rmtree(home, ignore_errors=True)
    if "no unprivileged user namespaces" in done.stderr:
        pytest.skip("this kernel gives unprivileged users no user namespaces")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(ln.split(" ", 1) for ln in done.stdout.splitlines())
    assert lines["jail"].startswith("0 "), lines  # compiled: neither file was visible
    assert not lines["plain"].startswith("0 ") and "visible" in lines["plain"], lines  # the control sees them


# -- the mutant builds compile the same text: contained the same way ------------------------------------
@pytest.mark.skipif(
    os.geteuid() != 0 and not user_namespaces_available(),
    reason="the compile jail needs root or user namespaces",
)
def test_the_mutant_build_cannot_read_what_the_compile_stage_could_not(tmp_path: Path) -> None:
    # a source that passes the contained compile stage (the file is invisible there) and would embed the
    # file's bytes when built anywhere it is visible: the mutant builds must be as blind as the compile
    folder = Path(tempfile.mkdtemp(prefix="ptxrag-test-world-"))
    folder.chmod(0o755)
    world = folder / "world.bin"
    world.write_text(SECRET)
    world.chmod(0o644)
    two_faced = (
        "#define CAT(a, b) a##b\n#define STR(x) XSTR(x)\n#define XSTR(x) #x\n"
        f'#if __has_include("{world}")\nasm(STR(.CAT(inc, bin)) " \\"{world}\\"");\n#endif\n'
        "__global__ void k(unsigned* out) {\n  unsigned v = threadIdx.x;\n"
        '  asm volatile("redux.sync.add.u32 %0, %0, 0xffffffff;" : "+r"(v));\n  out[threadIdx.x] = v;\n}\n'
    )
    assert check_source_paths(two_faced, []) is None  # only the jail stands in the way
    assert compile_candidate(two_faced, GENCODE, use_cache=False).status == "passed"
    (m,) = build_mutants(two_faced, GENCODE, ["redux.sync"], out_dir=tmp_path / "mutants")
    assert m.status == "built", m
    for lib in (tmp_path / "mutants").rglob("*"):
        if lib.is_file():
            assert SECRET.encode() not in lib.read_bytes(), f"{lib} holds the file's bytes"
    shutil.rmtree(folder)


def test_the_mutant_build_gets_no_secrets_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    # the replay used to inherit the caller's whole environment (tokens, keys, LD_PRELOAD)
    monkeypatch.setenv("PTXRAG_SERVICE_TOKEN", SECRET)
    seen: list[dict[str, str]] = []

    def spy(cmd, *, work, log_path, timeout_s, limits=None, env=None):  # noqa: ANN001, ANN202
        seen.append({**compile_env(work), **(env or {})})
        return real(cmd, work=work, log_path=log_path, timeout_s=timeout_s, limits=limits, env=env)

    from ptxrag.sandbox import mutation

    real = mutation.run_compiler
    monkeypatch.setattr(mutation, "run_compiler", spy)
    src = '__global__ void k(unsigned* o) { unsigned v = 1; asm volatile("redux.sync.add.u32 %0, %0, 0xffffffff;" : "+r"(v)); o[0] = v; }\n'
    (m,) = build_mutants(src, GENCODE, ["redux.sync"], out_dir=tmp_path)
    assert m.status == "built", m
    assert len(seen) == 3  # the dry run, the --keep build, the mutant's replay: all through the jail
    for env in seen:
        assert SECRET not in env.values() and "PTXRAG_SERVICE_TOKEN" not in env


# -- the static stage's tools parse the candidate's binary: contained too ------------------------------
@as_root
def test_the_binary_tools_run_contained(tmp_path: Path, secret: Path, monkeypatch) -> None:
    # host asm can put any bytes in the binary (a crafted fatbin or ELF), so cuobjdump, nm and readelf run as
    # the compiler does; a probe in the tool's place reports what such a tool could reach
    from ptxrag.sandbox.static import run_tool

    monkeypatch.setenv("PTXRAG_SERVICE_TOKEN", SECRET)
    tmp_path.chmod(0o755)
    tool = tmp_path / "bin" / "probe-tool"
    tool.parent.mkdir()
    tool.parent.chmod(0o755)
    tool.write_text(
        "#!/bin/sh\necho uid $(id -u)\nenv\n"
        f'test -e "{secret}" && echo SEEN-secret\ntest -e /etc/passwd && echo SEEN-passwd\n'
        'echo "pids $(ls /proc | grep -c "^[0-9]")"\ntest -e /proc/1 && echo SEEN-init\n'
        'echo "binary $(wc -c < "$1")"\n'
    )
    tool.chmod(0o755)
    binary = tmp_path / "lib.so"
    binary.write_bytes(b"\x7fELF" + b"\0" * 60)
    rc, out = run_tool(tool, [], binary, 60.0, "probe-tool")
    assert rc == 0, out
    uid = int(out.split("uid ", 1)[1].split()[0])
    assert COMPILE_UID_BASE <= uid < COMPILE_UID_BASE + 1000
    assert SECRET not in out and "TOKEN" not in out and "SEEN" not in out, out
    assert int(out.split("pids ", 1)[1].split()[0]) <= 4  # its own processes only (sh and its children)
    assert "binary 64" in out  # it got the binary (a private copy)
