"""The candidate process's native helpers, built once per toolchain with its nvcc.

``audit.so`` is an rtld audit library (LD_AUDIT) that refuses to load forbidden libraries; ``monitor.so``
records with CUPTI on which stream each kernel, copy and memset of a call ran. Both are built from
``gpu/native/`` into the compile cache, keyed on their source and the compiler, and copied into each GPU
worker's directory. A helper that cannot be built is an error of the harness, never a silent skip: without
it the run-time checks of the candidate would not happen.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ptxrag.base.deadlines import harness_timeout
from ptxrag.base.errors import SandboxFailure
from ptxrag.base.paths import cache_dir

from .toolchain import _wheel_roots, toolchain

NATIVE_DIR = Path(__file__).parent / "gpu" / "native"


# host code only: no CUDA runtime or device runtime linked in (the helpers must not bring their own)
_HOST_ONLY = ("-shared", "-Xcompiler", "-fPIC,-O2", "--cudart", "none", "--cudadevrt", "none")


@dataclass(frozen=True)
class NativeHelpers:
    audit: Path
    monitor: Path


def _cupti_dirs(nvcc: Path) -> tuple[Path, Path] | None:
    """(include dir, lib dir) holding cupti.h and libcupti.so, near nvcc or in the PyPI wheels."""
    tops = [nvcc.resolve().parent.parent]
    for var in ("PTXRAG_CUDA_HOME", "CUDA_HOME"):
        if os.environ.get(var):
            tops.append(Path(os.environ[var]))
    tops += sorted(Path("/usr/local").glob("cuda*"))
    roots = [r for t in tops for r in (t, t / "extras" / "CUPTI")]
    for w in _wheel_roots():
        roots += [w / "cu13", w / "cuda_cupti"]
    for r in roots:
        inc = r / "include"
        if not (inc / "cupti.h").is_file():
            continue
        for lib in (r / "lib64", r / "lib"):
            if any(lib.glob("libcupti.so*")):
                return inc, lib
    return None


def _run(cmd: list[str], what: str) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=harness_timeout(240))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxFailure(f"building the {what} failed: {e}") from e
    if p.returncode != 0:
        raise SandboxFailure(f"building the {what} failed: {(p.stderr or p.stdout).strip()[-800:]}")


def _build_into(dest: Path, build: Callable[[Path], None]) -> None:
    """Build ``dest`` through a name of this process and thread, then rename it into place: several workers
    (or sandboxes of other processes) that find the helper missing at once each build their own copy, and the
    last rename wins with an identical file, instead of one renaming another's half-written output away."""
    if dest.is_file():
        return
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        build(tmp)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


@functools.cache
def native_helpers() -> NativeHelpers:
    """Build (or find in the cache) the audit library and the stream monitor."""
    tc = toolchain()
    srcs = {name: (NATIVE_DIR / name).read_bytes() for name in ("audit.c", "monitor.cpp")}
    h = hashlib.sha256(tc.key.encode() + sys.platform.encode())
    for name in sorted(srcs):
        h.update(name.encode() + srcs[name])
    out = cache_dir("native", h.hexdigest()[:16])
    audit, monitor = out / "audit.so", out / "monitor.so"
    _build_into(
        audit,
        lambda tmp: _run(
            [str(tc.nvcc), *_HOST_ONLY, "-o", str(tmp), str(NATIVE_DIR / "audit.c"), *tc.extra_flags],
            "rtld audit library",
        ),
    )

    def build_monitor(tmp: Path) -> None:
        dirs = _cupti_dirs(tc.nvcc)
        if dirs is None:
            raise SandboxFailure(
                "CUPTI (cupti.h and libcupti.so) not found next to nvcc or in the nvidia-cuda-cupti wheel: "
                "the stream monitor cannot be built (pip install nvidia-cuda-cupti)"
            )
        inc, lib = dirs
        _run(
            [
                str(tc.nvcc),
                *_HOST_ONLY,
                f"-I{inc}",
                f"-L{lib}",
                "-lcupti",
                f"-Xlinker=-rpath,{lib}",
                "-o",
                str(tmp),
                str(NATIVE_DIR / "monitor.cpp"),
                *tc.extra_flags,
            ],
            "CUPTI stream monitor",
        )

    _build_into(monitor, build_monitor)
    return NativeHelpers(audit, monitor)
