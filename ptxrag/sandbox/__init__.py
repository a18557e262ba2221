"""The sandbox: compile, static SASS check, correctness, instruction-execution check and timing of a
candidate kernel. Knows nothing of agents or retrieval, so other harnesses can call it alone."""

from .containment import Limits
from .evaluator import Sandbox, SandboxConfig, StageLimits
from .results import (
    CheckResult,
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    StageResult,
    StaticResult,
    TimingResult,
)
from .toolchain import GpuInfo, ToolchainError, detect_gpu

__all__ = [
    "CheckResult",
    "CompileResult",
    "CorrectnessResult",
    "EvaluationReport",
    "ExecutionResult",
    "GpuInfo",
    "Limits",
    "Sandbox",
    "SandboxConfig",
    "StageLimits",
    "StageResult",
    "StaticResult",
    "TimingResult",
    "ToolchainError",
    "detect_gpu",
]
