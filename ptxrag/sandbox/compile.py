"""Stage 1: compile a candidate .cu into a shared library with nvcc, with a content-keyed cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from importlib import resources
from pathlib import Path

from ptxrag.base.paths import cache_dir

from .results import CompileResult
from .toolchain import ToolchainError, toolchain

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
    flags = [gencode, "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v"]
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


def compile_candidate(
    source: str,
    gencode: str,
    *,
    timeout_s: float = 120.0,
    use_cache: bool = True,
    out_dir: Path | None = None,
) -> CompileResult:
    """Compile ``source``. On success ``library_path`` points at a cached shared library."""
    t0 = time.monotonic()
    try:
        tc = toolchain()
    except ToolchainError as e:
        return CompileResult(status="error", message=str(e), wall_s=time.monotonic() - t0)
    flags = compile_flags(gencode, tc.extra_flags)
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
    with tempfile.TemporaryDirectory(prefix="ptxrag-compile-") as work:
        src = Path(work) / SOURCE_NAME
        src.write_text(source)
        lib = Path(work) / LIB_NAME
        cmd = [str(tc.nvcc), *flags, "-o", str(lib), str(src)]
        shown_cmd = [
            "nvcc",
            *[f for f in flags if not f.startswith(("-I", "-L"))],
            "-o",
            LIB_NAME,
            SOURCE_NAME,
        ]
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        except OSError as e:
            return CompileResult(
                status="error", message=f"could not start nvcc: {e}", wall_s=time.monotonic() - t0
            )
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return CompileResult(
                status="failed",
                message=f"compilation did not finish within {timeout_s:.0f} s (heavy templates or unrolling?)",
                command=shown_cmd,
                toolchain=tc.nvcc_version,
                wall_s=time.monotonic() - t0,
            )
        log = trim_log(out, work)
        if proc.returncode != 0 or not lib.is_file():
            first = next((ln for ln in log.splitlines() if _ERR_RE.search(ln)), "nvcc failed")
            return CompileResult(
                status="failed",
                message=f"compile error: {first.strip()[:300]}",
                command=shown_cmd,
                log=log,
                toolchain=tc.nvcc_version,
                wall_s=time.monotonic() - t0,
            )
        tmp_entry = entry.with_name(entry.name + f".tmp{os.getpid()}-{threading.get_ident()}")
        tmp_entry.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, tmp_entry / LIB_NAME)
        (tmp_entry / SOURCE_NAME).write_text(source)
        message = "compiled"
        if "C7508" in out or "C7510" in out:
            message += "; ptxas warns that setmaxnreg was ignored (see log)"
        (tmp_entry / "result.json").write_text(
            json.dumps({"message": message, "command": shown_cmd, "log": log})
        )
        if entry.exists():
            shutil.rmtree(tmp_entry, ignore_errors=True)
        else:
            os.replace(tmp_entry, entry)  # atomic publish: a killed compile never leaves half an entry
    return CompileResult(
        status="passed",
        message=message,
        command=shown_cmd,
        log=log,
        library_path=str(entry / LIB_NAME),
        toolchain=tc.nvcc_version,
        wall_s=time.monotonic() - t0,
    )
