"""Stage 1: compile a candidate .cu into a shared library with nvcc, with a content-keyed cache.

The compiler reads untrusted text, so it runs contained (``containment.py``): a scrubbed environment, a
memory cap per process (RLIMIT_AS) and for the whole compile (sampled), a process cap, a bounded log, and,
when running as root, a dedicated unprivileged uid, no network and a private mount namespace in which only
the candidate's directory, the ABI and template headers, the CUDA toolkit and the host compiler exist.
Before nvcc starts, ``check_source_paths`` refuses includes outside the allowed roots and the assembler
directives that read files (``.incbin``, ``.include``), with a message for the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ptxrag.base.deadlines import harness_timeout
from ptxrag.base.paths import cache_dir

from .containment import Limits, Tracked, describe_exit, run_contained, user_namespaces_available
from .results import CompileResult
from .toolchain import Toolchain, ToolchainError, toolchain

LIB_NAME = "candidate.so"
SOURCE_NAME = "candidate.cu"


def abi_include_dir() -> Path:
    return Path(str(resources.files("ptxrag.sandbox") / "abi"))


def template_include_dir() -> Path | None:
    """The knowledge pack's PTX template headers, so candidates may include them."""
    try:
        p = Path(str(resources.files("ptxrag.corpus") / "templates"))
    except ModuleNotFoundError:
        return None
    return p if p.is_dir() else None


def _include_dirs() -> list[Path]:
    dirs = [abi_include_dir()]
    t = template_include_dir()
    if t is not None:
        dirs.append(t)
    return dirs


def compile_flags(gencode: str, extra: tuple[str, ...] = ()) -> list[str]:
    # --no-device-link: a -shared build otherwise runs a device link that embeds a second, empty cubin for the
    # same architecture (whole-program compilation has nothing to link); every disassembly (the static
    # stage, each mutant) then paid nvdisasm's start-up twice, about 0.3 s CPU per image
    flags = [gencode, "-O3", "-std=c++17", "-shared", "--no-device-link", "-Xcompiler", "-fPIC", "-lineinfo"]
    flags += ["-Xptxas", "-v"]
    flags += [f"-I{d}" for d in _include_dirs()]
    return flags + list(extra)


def _headers_digest() -> str:
    h = hashlib.sha256()
    for d in _include_dirs():
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix in (".h", ".cuh", ".hpp"):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(source: str, flags: list[str]) -> str:
    tc = toolchain()
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), tc.key, _headers_digest()):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


_ERR_RE = re.compile(r"(error|fatal)", re.IGNORECASE)
_WARN_RE = re.compile(r"warning", re.IGNORECASE)
_NVCC_TMP_RE = re.compile(r"\S*/tmpxft_[0-9a-f_-]+(?:\d+_)?candidate(\.\w+)")


def trim_log(log: str, workdir: str | None = None, max_lines: int = 40, max_chars: int = 4000) -> str:
    """Keep what a model needs: error lines with the source line nvcc quotes after them.

    When there is no error, keep warnings (e.g. ptxas C7508: setmaxnreg ignored) and ptxas resource
    lines. Temp paths are replaced by the file's plain name.
    """
    if workdir:
        log = log.replace(workdir.rstrip("/") + "/", "")
    log = _NVCC_TMP_RE.sub(r"candidate\1", log)  # nvcc's own temp files (ptxas reads candidate.ptx)
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    has_err = any(_ERR_RE.search(ln) for ln in lines)
    keep: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if (has_err and _ERR_RE.search(ln)) or (not has_err and (_WARN_RE.search(ln) or "ptxas info" in ln)):
            keep.append(ln)
            # nvcc quotes the offending source line and a caret after an error/warning
            j = i + 1
            while j < len(lines) and j <= i + 2 and not _ERR_RE.search(lines[j]) and "ptxas" not in lines[j]:
                keep.append(lines[j])
                j += 1
            i = j
            continue
        i += 1
    if has_err:
        n_err = sum(1 for ln in keep if _ERR_RE.search(ln))
        if len(keep) > max_lines:
            keep = keep[:max_lines] + [f"... ({n_err} error lines in all; first ones shown)"]
    else:
        keep = keep[:max_lines]
    out = "\n".join(keep)
    return out[:max_chars] + ("\n...(truncated)" if len(out) > max_chars else "")


@dataclass(frozen=True)
class CompileLimits:
    """Bounds of one compile. ``PTXRAG_COMPILE_ISOLATE=0`` turns the uid/network/mount isolation off (for a
    toolkit the sandbox uid cannot read); the caps always apply."""

    memory_bytes: int = 4 << 30  #: per compiler process (RLIMIT_AS) and for all of them together (sampled)
    max_procs: int = 32  #: processes of one compile (nvcc runs its steps one or two at a time)
    #: largest file the compiler may write (the library, nvcc's temp files, the log)
    file_bytes: int = 1 << 30
    log_bytes: int = 1 << 20  #: compiler output read back; the rest is dropped before trimming
    #: no network and a private mount namespace; as root also its own uid; without root in a user namespace
    isolate: bool = True


#: uids of contained compiles (root only); one per concurrent compile of this process, none shared with the
#: GPU children (64000 up)
COMPILE_UID_BASE = 63000
_COMPILE_UIDS = 1000
_uid_lock = threading.Lock()
_uids_busy: set[int] = set()


def _take_uid() -> int:
    with _uid_lock:
        start = (os.getpid() * 37) % _COMPILE_UIDS  # two processes rarely start on the same uid
        for i in range(_COMPILE_UIDS):
            uid = COMPILE_UID_BASE + (start + i) % _COMPILE_UIDS
            if uid not in _uids_busy:
                _uids_busy.add(uid)
                return uid
    raise ToolchainError("no free compile uid (more than 1000 concurrent compiles)")


def _give_uid(uid: int) -> None:
    with _uid_lock:
        _uids_busy.discard(uid)


_SYSTEM_ROOTS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",  # /usr/bin/c++ -> /etc/alternatives/c++
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)


def _toolkit_roots(tc: Toolchain) -> list[Path]:
    roots = {tc.nvcc.parent.parent, tc.nvcc.resolve().parent.parent}
    roots |= {Path(f[2:]) for f in tc.extra_flags if f.startswith(("-L", "-I"))}
    return sorted(roots)


def compile_read_roots(tc: Toolchain) -> tuple[str, ...]:
    """What the contained compiler can read: the host compiler and system libraries (``/usr``, the
    loader's cache), the CUDA toolkit, the ABI and template headers, and ``PTXRAG_COMPILE_EXTRA_ROOTS``
    (``:``-separated, for a host compiler outside /usr). Its own directory is added by the mechanism."""
    roots = [*_SYSTEM_ROOTS, *(str(p) for p in _toolkit_roots(tc)), *(str(d) for d in _include_dirs())]
    roots += [str(Path(d).parent) for d in _host_compiler_dirs()]
    roots += [r for r in os.environ.get("PTXRAG_COMPILE_EXTRA_ROOTS", "").split(os.pathsep) if r]
    return tuple(roots)


def _host_compiler_dirs() -> list[str]:
    """Folders of a gcc/g++ on the caller's PATH that live outside /usr (a conda or module toolchain)."""
    dirs: list[str] = []
    for name in ("gcc", "g++"):
        found = shutil.which(name)
        if found and not found.startswith("/usr/"):
            d = str(Path(found).resolve().parent)
            if d not in dirs:
                dirs.append(d)
    return dirs


def compile_env(workdir: Path) -> dict[str, str]:
    """The compiler's whole environment: no tokens, keys, proxies, LD_PRELOAD or compiler overrides."""
    return {
        "PATH": ":".join([*_host_compiler_dirs(), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C",
        "LC_ALL": "C",
    }


# -- refused before compiling -------------------------------------------------------------------------
_SPLICE_RE = re.compile(r"\\\r?\n")
#: comments, and the literals a comment marker inside them must not start one in (raw strings too)
_LEXEME_RE = re.compile(
    r'R"([^()\\\s]{0,16})\((.*?)\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/',
    re.DOTALL,
)


def strip_comments(source: str) -> str:
    """``source`` with its comments blanked and its string and character literals kept."""
    return _LEXEME_RE.sub(
        lambda m: " " + "\n" * m.group(0).count("\n") if m.group(0).startswith("/") else m.group(0), source
    )


_DIRECTIVE_RE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(include_next|include|import|embed)\b(.*)$", re.MULTILINE)
_HEADER_RE = re.compile(r'^\s*(?:"([^"\n]*)"|<([^>\n]*)>)')
#: GNU as directives that read a file into the object (``.incbin``) or the assembly (``.include``)
_ASM_FILE_RE = re.compile(r"\.\s*(incbin|include)\b", re.IGNORECASE)
_STRING_JOIN_RE = re.compile(r'"\s*"')  # "a" "b" is one literal "ab"


def _inside(path: str, roots: list[Path]) -> bool:
    p = os.path.normpath(path)
    return any(p == str(r) or p.startswith(str(r).rstrip("/") + "/") for r in roots)


def check_source_paths(source: str, allowed_roots: list[Path]) -> str | None:
    """A message saying why ``source`` is refused before compiling, or None.

    Refused: an ``#include`` of an absolute path outside ``allowed_roots`` (the ABI and template headers,
    the CUDA toolkit, /usr/include) or of a relative path whose ``..`` leaves the folder it is resolved in;
    ``#include`` of a macro (the path cannot be checked); ``#embed``; and the assembler's file-reading
    directives ``.incbin`` and ``.include`` anywhere in the code (inline or host asm). Comments are ignored.
    The private mount namespace is the mechanism that keeps other files unreadable; this check gives the
    model a clear message and covers compiles without root."""
    code = strip_comments(_SPLICE_RE.sub("", source))
    for m in _DIRECTIVE_RE.finditer(code):
        kind, rest = m.group(1), m.group(2)
        line = code.count("\n", 0, m.start()) + 1
        if kind == "embed":
            return f"refused before compiling: line {line}: #embed reads a file into the program; it is not allowed"
        h = _HEADER_RE.match(rest)
        if h is None:
            return (
                f"refused before compiling: line {line}: #{kind} of a macro or an unquoted name; "
                'name the header as "file.h" or <file.h>'
            )
        name = h.group(1) if h.group(1) is not None else h.group(2)
        if os.path.isabs(name):
            if not _inside(name, allowed_roots):
                return (
                    f'refused before compiling: line {line}: #{kind} "{name}" is outside the allowed include '
                    "roots (the ABI and template headers, the CUDA toolkit, system headers); include headers by "
                    "their plain name"
                )
        elif os.path.normpath(name).split(os.sep)[0] == "..":
            return (
                f'refused before compiling: line {line}: #{kind} "{name}" climbs out of the include folders '
                "with ..; include headers by their plain name"
            )
    for text in (code, _STRING_JOIN_RE.sub("", code)):
        a = _ASM_FILE_RE.search(text)
        if a is not None:
            return (
                f"refused before compiling: the assembler directive .{a.group(1).lower()} reads a file into the "
                "binary; it is not allowed in inline or host asm"
            )
    return None


def _allowed_include_roots(tc: Toolchain) -> list[Path]:
    return [*_include_dirs(), *_toolkit_roots(tc), Path("/usr/include"), Path("/usr/local/cuda/include")]


# -- logs ---------------------------------------------------------------------------------------------
#: CSI (colours, cursor moves), OSC (titles, hyperlinks) and other escape sequences, then any control
#: character but tab and newline: a log goes to remote clients and terminals
_ESCAPE_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def scrub_log(text: str) -> str:
    """Remove terminal escape sequences and control characters (``\r`` too; tabs and newlines stay)."""
    return _CONTROL_RE.sub("", _ESCAPE_RE.sub("", text.replace("\r\n", "\n")))


def read_log(path: Path, max_bytes: int) -> str:
    """At most ``max_bytes`` of the compiler's output, decoded leniently and scrubbed."""
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError:
        return ""
    more = len(data) > max_bytes
    text = scrub_log(data[:max_bytes].decode("utf-8", errors="replace"))
    return text + (f"\n... (compiler output cut at {max_bytes} bytes)" if more else "")


#: what the tools print when an allocation fails (line starts, so a quoted source line does not count)
_OOM_RE = re.compile(
    r"^(?:[\w.+-]+: )?(?:fatal error: )?(?:out of memory|virtual memory exhausted|memory exhausted)"
    r"|^LLVM ERROR: out of memory|^terminate called after throwing an instance of 'std::bad_alloc'"
    r"|^.{0,80}(?:Memory allocation fail|Cannot allocate memory)",
    re.IGNORECASE | re.MULTILINE,
)


def _contained_limits(
    lim: CompileLimits,
    timeout_s: float,
    uid: int | None,
    tc: Toolchain,
    *,
    jail: bool = True,
    extra_roots: tuple[str, ...] = (),
    proc: bool = False,
) -> Limits:
    """The compile's containment limits; ``jail``: no network and the private root (as root with ``uid``,
    else in a user namespace), showing the compile's read roots and ``extra_roots``."""
    return Limits(
        memory_bytes=lim.memory_bytes,
        max_procs=lim.max_procs,
        cpu_s=int(timeout_s) + 10,
        file_bytes=lim.file_bytes,
        open_files=1024,
        uid=uid,
        isolate_network=jail,
        address_space_bytes=lim.memory_bytes,
        read_roots=(*compile_read_roots(tc), *extra_roots) if jail else None,
        proc=proc,
    )


class CompilerStartError(ToolchainError):
    """A contained compiler command could not start (e.g. the compile uid cannot read the toolkit)."""


def run_compiler(
    cmd: list[str],
    *,
    work: Path,
    log_path: Path,
    timeout_s: float,
    limits: CompileLimits | None = None,
    env: dict[str, str] | None = None,
    wall_s: float | None = None,
    extra_roots: tuple[str, ...] = (),
    proc: bool = False,
) -> tuple[int | None, Tracked]:
    """Run one compiler command (nvcc, a replay of its steps, a tool reading what they built) contained as
    the compile stage is: a
    scrubbed environment (``compile_env``, plus ``env``), the memory, process, file and CPU caps, and, where
    available, its own uid, no network and the private root holding only ``work`` and the compile's read
    roots. ``timeout_s`` is the CPU-second budget of each process; the wall-clock deadline is ``timeout_s``
    stretched by the machine's load and PTXRAG_TIMEOUT_SCALE (``harness_timeout``), so a busy machine does
    not turn a compile that fits its budget into a failure; ``wall_s`` gives it exactly instead. The tool
    may live outside the compile's read roots: ``extra_roots`` shows more folders, read-only; ``proc``
    gives it a /proc of its own processes (``Limits.proc``). Returns
    (returncode or None when killed, tracking); output goes to ``log_path`` (outside ``work``)."""
    lim = limits or CompileLimits()
    tc = toolchain()
    isolate = lim.isolate and os.environ.get("PTXRAG_COMPILE_ISOLATE", "1") != "0"
    uid = _take_uid() if isolate and os.geteuid() == 0 else None
    # without root, the same private root and empty network in a user namespace, where the kernel allows one
    jail = isolate and (uid is not None or user_namespaces_available())
    try:
        return run_contained(
            cmd,
            cwd=work,
            env={**compile_env(work), **(env or {})},
            limits=_contained_limits(lim, timeout_s, uid, tc, jail=jail, extra_roots=extra_roots, proc=proc),
            timeout_s=harness_timeout(timeout_s) if wall_s is None else wall_s,
            stdout_path=log_path,
            sweep_uid=False,  # a compile uid is this compile's alone; its session is killed anyway
        )
    except (OSError, subprocess.SubprocessError) as e:
        hint = (
            f" (as the compile uid {uid}, which must be able to read the CUDA toolkit; "
            "PTXRAG_COMPILE_ISOLATE=0 compiles without the uid and namespaces)"
            if uid is not None
            else ""
        )
        raise CompilerStartError(f"{e}{hint}") from e
    finally:
        if uid is not None:
            _give_uid(uid)


def compile_candidate(
    source: str,
    gencode: str,
    *,
    timeout_s: float = 120.0,
    use_cache: bool = True,
    out_dir: Path | None = None,
    limits: CompileLimits | None = None,
) -> CompileResult:
    """Compile ``source``. On success ``library_path`` points at a cached shared library. ``timeout_s``: the
    CPU seconds each compiler process may use, and the wall-clock deadline on an idle machine (it stretches
    with the load, see ``run_compiler``)."""
    t0 = time.monotonic()
    lim = limits or CompileLimits()
    try:
        tc = toolchain()
    except ToolchainError as e:
        return CompileResult(status="error", message=str(e), wall_s=time.monotonic() - t0)
    flags = compile_flags(gencode, tc.extra_flags)
    shown_cmd = ["nvcc", *[f for f in flags if not f.startswith(("-I", "-L"))], "-o", LIB_NAME, SOURCE_NAME]
    refused = check_source_paths(source, _allowed_include_roots(tc))
    if refused is not None:
        return CompileResult(
            status="failed",
            message=refused,
            command=shown_cmd,
            toolchain=tc.nvcc_version,
            wall_s=time.monotonic() - t0,
        )
    key = cache_key(source, flags)
    entry = (out_dir or cache_dir("compile")) / key[:2] / key
    meta_file = entry / "result.json"
    if use_cache and meta_file.is_file() and (entry / LIB_NAME).is_file():
        meta = json.loads(meta_file.read_text())
        return CompileResult(
            status="passed",
            message=meta["message"] + " (from cache)",
            command=meta["command"],
            log=meta["log"],
            cache_hit=True,
            library_path=str(entry / LIB_NAME),
            toolchain=tc.nvcc_version,
            wall_s=time.monotonic() - t0,
        )
    with tempfile.TemporaryDirectory(prefix="ptxrag-compile-") as base:
        os.chmod(base, 0o711)  # the compile uid passes through to its own folder, reads nothing here
        work = Path(base) / "work"
        work.mkdir()
        src = work / SOURCE_NAME
        src.write_text(source)
        lib = work / LIB_NAME
        log_path = Path(base) / "compile.log"
        cmd = [str(tc.nvcc), *flags, "-o", str(lib), str(src)]
        try:
            rc, tracked = run_compiler(cmd, work=work, log_path=log_path, timeout_s=timeout_s, limits=lim)
        except CompilerStartError as e:
            return CompileResult(
                status="error", message=f"could not start nvcc: {e}", wall_s=time.monotonic() - t0
            )
        out = read_log(log_path, lim.log_bytes)
        log = trim_log(out, str(work))
        done = dict(command=shown_cmd, log=log, toolchain=tc.nvcc_version)
        reason = tracked.killed_reason or ""
        if rc is None and reason.startswith("did not finish"):
            return CompileResult(
                status="failed",
                message=f"compilation {reason} (heavy templates or unrolling?)",
                wall_s=time.monotonic() - t0,
                **done,  # type: ignore[arg-type]
            )
        if rc is None or (rc != 0 and _OOM_RE.search(out)):
            what = (
                f"compiler exceeded its memory limit ({lim.memory_bytes >> 20} MiB)"
                if rc is not None or "memory" in reason
                else f"compiler stopped: it {reason}"
            )
            return CompileResult(status="failed", message=what, wall_s=time.monotonic() - t0, **done)  # type: ignore[arg-type]
        if rc != 0 or not lib.is_file():
            first = next((ln for ln in log.splitlines() if _ERR_RE.search(ln)), "")
            if not first:
                first = f"nvcc {describe_exit(rc)}"
            return CompileResult(
                status="failed",
                message=f"compile error: {first.strip()[:300]}",
                wall_s=time.monotonic() - t0,
                **done,  # type: ignore[arg-type]
            )
        tmp_entry = entry.with_name(entry.name + f".tmp{os.getpid()}-{threading.get_ident()}")
        tmp_entry.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, tmp_entry / LIB_NAME)  # owned by us, not by the compile uid
        os.chmod(tmp_entry / LIB_NAME, 0o755)
        (tmp_entry / SOURCE_NAME).write_text(source)
        message = "compiled"
        if "C7508" in out or "C7510" in out:
            message += "; ptxas warns that setmaxnreg was ignored (see log)"
        (tmp_entry / "result.json").write_text(
            json.dumps({"message": message, "command": shown_cmd, "log": log})
        )
        try:
            if entry.exists():
                raise FileExistsError(entry)
            os.replace(tmp_entry, entry)  # atomic publish: a killed compile never leaves half an entry
        except OSError:
            # another thread or process (two jobs with the same source, test workers sharing a cache) published
            # the same entry between the check and the rename: theirs is as good as ours
            shutil.rmtree(tmp_entry, ignore_errors=True)
            if not (entry / LIB_NAME).is_file():
                raise
    return CompileResult(
        status="passed",
        message=message,
        command=shown_cmd,
        log=log,
        library_path=str(entry / LIB_NAME),
        toolchain=tc.nvcc_version,
        wall_s=time.monotonic() - t0,
    )
