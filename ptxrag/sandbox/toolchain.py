"""Locate the CUDA tools (nvcc, cuobjdump, ncu) and the GPU.

Search order for nvcc and cuobjdump: ``PTXRAG_CUDA_HOME``/bin, the PyPI wheels (``nvidia-cuda-nvcc``,
``nvidia-cuda-cuobjdump``: ``site-packages/nvidia/cu13/bin``), ``CUDA_HOME``/bin, ``PATH``,
``/usr/local/cuda/bin``. ncu comes from ``PTXRAG_NCU``, ``PATH`` or ``/usr/local/cuda/bin``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ptxrag.base.deadlines import harness_timeout
from ptxrag.base.errors import SandboxFailure


class ToolchainError(SandboxFailure, RuntimeError):
    """A CUDA tool is missing or broken. The message says how to get it."""


def _wheel_roots() -> list[Path]:
    roots = []
    for entry in sys.path:
        for cu in ("cu13", "cu12"):
            p = Path(entry) / "nvidia" / cu
            if (p / "bin").is_dir():
                roots.append(p)
    return roots


def _candidate_bins() -> list[Path]:
    bins: list[Path] = []
    if os.environ.get("PTXRAG_CUDA_HOME"):
        bins.append(Path(os.environ["PTXRAG_CUDA_HOME"]) / "bin")
    bins += [r / "bin" for r in _wheel_roots()]
    if os.environ.get("CUDA_HOME"):
        bins.append(Path(os.environ["CUDA_HOME"]) / "bin")
    bins += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    bins.append(Path("/usr/local/cuda/bin"))
    return bins


def find_tool(name: str) -> Path | None:
    for b in _candidate_bins():
        p = b / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    found = shutil.which(name)
    return Path(found) if found else None


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    cuobjdump: Path | None
    nvcc_version: str
    extra_flags: tuple[str, ...]

    @property
    def key(self) -> str:
        """Identifies the compiler for the compile cache."""
        return f"{self.nvcc.resolve()}|{self.nvcc_version}"


def _nvcc_extra_flags(nvcc: Path) -> tuple[str, ...]:
    """The PyPI nvcc's profile points its linker at lib64/, but the wheel ships lib/: add it."""
    top = nvcc.resolve().parent.parent
    if (top / "lib").is_dir() and not (top / "lib64").is_dir():
        return (f"-L{top / 'lib'}",)
    return ()


@functools.cache
def toolchain() -> Toolchain:
    """The compile toolchain, or a ToolchainError saying how to install it."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainError(
            "nvcc not found. Install the pinned toolchain from PyPI with "
            "`pip install nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 "
            "nvidia-cuda-runtime==13.0.96` (ptxrag's dependencies do this), or set PTXRAG_CUDA_HOME "
            "to a CUDA install."
        )
    try:
        out = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=harness_timeout(60.0)
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"{nvcc} --version failed: {e}") from e
    version = next((ln.strip() for ln in out.splitlines() if "release" in ln), out.strip()[-80:])
    return Toolchain(nvcc, find_tool("cuobjdump"), version, _nvcc_extra_flags(nvcc))


def require_cuobjdump() -> Path:
    tc = toolchain()
    if tc.cuobjdump is None:
        raise ToolchainError(
            "cuobjdump not found. Install it from PyPI with `pip install nvidia-cuda-cuobjdump==13.2.51 "
            "nvidia-cuda-nvdisasm==13.2.51`, or put a CUDA install's bin/ on PATH."
        )
    return tc.cuobjdump


def find_ncu() -> Path | None:
    env = os.environ.get("PTXRAG_NCU")
    if env:
        return Path(env)
    found = shutil.which("ncu")
    if found:
        return Path(found)
    p = Path("/usr/local/cuda/bin/ncu")
    return p if p.is_file() else None


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: tuple[int, int]

    @property
    def label(self) -> str:
        return f"{self.name} (sm_{self.compute_capability[0]}{self.compute_capability[1]})"


@functools.cache
def detect_gpu() -> GpuInfo | None:
    """The first visible NVIDIA GPU, or None. Uses nvidia-smi so the orchestrator never touches CUDA."""
    if os.environ.get("PTXRAG_NO_GPU"):
        return None
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=harness_timeout(30.0),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    first = out.stdout.strip().splitlines()[0]
    name, _, cc = first.rpartition(",")
    try:
        major, minor = (int(x) for x in cc.strip().split("."))
    except ValueError:
        return None
    return GpuInfo(name.strip(), (major, minor))
