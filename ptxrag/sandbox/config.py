"""The evaluator's configuration: one typed object for every stage and process."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .containment import Limits


class GpuSharing(Protocol):
    """How the GPU stages share one GPU (``ptxrag.sandbox.gpushare.GpuShare`` is the implementation)."""

    def shared(self) -> AbstractContextManager[None]: ...

    def exclusive(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class StageLimits:
    #: CPU seconds each compiler process may use (compile stage and mutant builds); also their wall-clock
    #: deadline on an idle machine, stretched by the load and PTXRAG_TIMEOUT_SCALE (compile.run_compiler)
    compile_s: float = 180.0
    gpu_start_s: float = 90.0  # worker start: import torch, CUDA init, load the library
    correctness_s: float = 120.0
    execution_s: float = 180.0
    timing_s: float = 180.0


@dataclass
class SandboxConfig:
    """One typed config for the evaluator. Environment values: PTXRAG_RUNNER_PYTHON, PTXRAG_NO_GPU,
    PTXRAG_ISOLATE, PTXRAG_SANDBOX_NO_SPAWN."""

    runner_python: str = field(default_factory=lambda: os.environ.get("PTXRAG_RUNNER_PYTHON", sys.executable))
    #: PTXRAG_ISOLATE=1: dedicated uid + empty network namespace for candidate processes (when root)
    limits: Limits = field(
        default_factory=lambda: Limits.isolated() if os.environ.get("PTXRAG_ISOLATE") == "1" else Limits()
    )
    stage_limits: StageLimits = field(default_factory=StageLimits)
    use_compile_cache: bool = True
    run_timing: bool = True
    #: False: skip the mutation stage (a report then never says success; for debugging the other stages)
    run_mutation: bool = True
    #: keep the GPU worker (PyTorch, CUDA context, baseline timings) warm between evaluations of one Sandbox
    keep_worker: bool = True
    #: how many warm workers wait for the next candidate (one per candidate that evaluates at the same time)
    idle_workers: int = 2
    #: forbid the candidate's process (and the profiled launch's) to create processes or run programs once
    #: its library is loaded (``gpu/nospawn.py``, seccomp via libseccomp; it closes a helper that is forked,
    #: execs with a clean environment and is reaped within one call). On by default since session 10 (the
    #: H200 run: every task's reference passes every stage with it, docs/validation/2026-12-05-s10-gpu.txt);
    #: PTXRAG_SANDBOX_NO_SPAWN=0 turns it off (weaker: such a helper then goes unseen)
    forbid_process_creation: bool = field(
        default_factory=lambda: os.environ.get("PTXRAG_SANDBOX_NO_SPAWN", "1") != "0"
    )
    keep_workdir: bool = False
    artifacts_dir: Path | None = None  # copy ncu CSV, SASS excerpt and logs here when set
    cuda_device: str | None = (
        None  # CUDA_VISIBLE_DEVICES for the GPU children (a service pins one GPU per job)
    )
    #: how the GPU stages share the GPU with other candidates: correctness and mutation hold it shared, the ncu
    #: launch and timing alone (``ptxrag.sandbox.gpushare.GpuShare``; the bench and the service pass one per
    #: GPU). None: this sandbox assumes it has the GPU to itself
    gpu_share: GpuSharing | None = None
    #: held around the compile and static stages (a bench bounds how many compile at once)
    cpu_lock: Callable[[], AbstractContextManager[Any]] | None = None
