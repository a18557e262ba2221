"""The task format: one folder per task with ``task.toml``, ``reference.py``, a reference solution and
negative controls. This module holds the typed, validated form of ``task.toml``.

The format is deliberately plain TOML + Python so other projects can read it without ptxrag.
See docs/tasks.md for a walk-through.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ptxrag.base.expr import ExpressionError, evaluate

#: dtype names accepted in task specs (torch names without the ``torch.`` prefix).
DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int32",
    "int64",
    "int8",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
    "uint32",
    "int16",
)
Dtype = Literal[
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int32",
    "int64",
    "int8",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
    "uint32",
    "int16",
]

#: Known GPU targets: arch name -> (compute capability, nvcc -gencode flag).
ARCHS: dict[str, tuple[tuple[int, int], str]] = {
    "sm_80": ((8, 0), "-gencode=arch=compute_80,code=sm_80"),
    "sm_90": ((9, 0), "-gencode=arch=compute_90,code=sm_90"),
    "sm_90a": ((9, 0), "-gencode=arch=compute_90a,code=sm_90a"),
    "sm_100a": ((10, 0), "-gencode=arch=compute_100a,code=sm_100a"),
    "sm_120a": ((12, 0), "-gencode=arch=compute_120a,code=sm_120a"),
}

#: Things a task can forbid. Each maps to what the static check looks for (see sandbox/static.py).
FORBIDDABLE = ("cublas", "cublaslt", "cudnn", "cutlass", "cute", "thrust", "cub", "torch", "dlopen", "triton")

#: the reference solution's instruction counts, written by `ptxrag tasks validate --record-counts`
COUNTS_FILE = "execution-counts.json"

Stage = Literal["compile", "static", "correctness", "execution", "mutation", "timing"]

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,63}$")
_DIM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InitSpec(_Frozen):
    """How to draw fresh random values for an input (never zeros: zeros hide unwritten outputs)."""

    kind: Literal["normal", "uniform", "randint"] = "normal"
    mean: float = 0.0
    std: float = 1.0
    low: float = -1.0
    high: float = 1.0

    @model_validator(mode="after")
    def _check(self) -> InitSpec:
        if self.kind in ("uniform", "randint") and not self.low < self.high:
            raise ValueError(f"init: low ({self.low}) must be below high ({self.high})")
        if self.kind == "normal" and self.std <= 0:
            raise ValueError("init: std must be positive")
        return self


Dim = int | str


class TensorSpec(_Frozen):
    """An input or output tensor: a name, a dtype and a shape made of dimension names or integers."""

    name: str
    dtype: Dtype
    shape: list[Dim]
    init: InitSpec = InitSpec()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _DIM_RE.match(v):
            raise ValueError(f"tensor name {v!r} must be an identifier")
        return v

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list[Dim]) -> list[Dim]:
        if len(v) > 8:
            raise ValueError("at most 8 dimensions")
        for d in v:
            if isinstance(d, str) and not _DIM_RE.match(d):
                raise ValueError(f"dimension {d!r} must be an identifier or an integer")
            if isinstance(d, int) and d < 1:
                raise ValueError(f"dimension {d} must be positive")
        return v


class ScalarSpec(_Frozen):
    name: str
    value: float


class ShapeSets(_Frozen):
    """Dimension values. ``check`` sets drive correctness (fresh inputs each); ``timing`` drives timing."""

    check: Annotated[list[dict[str, int]], Field(min_length=1)]
    timing: dict[str, int]
    awkward: list[int] = Field(
        default_factory=list,
        description="indexes into `check` of the awkward shapes (not multiples of the natural tile)",
    )


class Tolerance(_Frozen):
    atol: float = 1e-5
    rtol: float = 1e-5


class TimingSpec(_Frozen):
    warmup: int = 5
    reps: int = 30
    #: FLOPs of one call at the timing shape, as an expression of the dimensions (e.g. "2*m*n*k"); with
    #: the bytes every input and output occupies, it gives the roofline bound below which timing fails
    flops: str | None = None
    #: which peak rate the FLOPs run at (tensor-core operand type, or "fp32" for CUDA cores)
    flops_type: Literal["bf16", "fp16", "fp8", "int8", "tf32", "fp64", "fp32"] = "fp32"
    #: bytes one call must move at least, when not every input and output is touched once
    bytes: str | None = None
    #: a task whose honest kernels may beat the roofline bound (e.g. inputs that need not all be read)
    roofline: bool = True
    #: an explicit ceiling on the speedup over the baseline, on top of the roofline bound
    max_plausible_speedup: float | None = None


class ExecutionSpec(_Frozen):
    """How much of each required instruction one profiled call must execute (predicated-on thread count)."""

    #: instruction -> minimum count as an expression of the check shape's dimensions
    min_counts: dict[str, str] = Field(default_factory=dict)
    #: without an expression: this fraction of the reference solution's count (recorded by `tasks validate`)
    min_fraction_of_reference: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1


class ControlSpec(_Frozen):
    """A negative control: a kernel that must fail, at the declared stage."""

    file: str
    must_fail_at: Stage
    why: str


class AlternativeSpec(_Frozen):
    """A second honest solution, structured differently from the reference: it must pass every stage, so
    that the checks are shown to credit honest work they were not written against."""

    file: str
    why: str


class ReferenceSpec(_Frozen):
    file: str = "reference.py"
    function: str = "reference"
    baseline_function: str = "baseline"
    #: dtype the reference computes in ("float64" upcasts every floating input; "native" leaves them).
    precision: Literal["float64", "native"] = "float64"


class TaskSpec(_Frozen):
    """A benchmark task. Paths are relative to the task folder (``root``)."""

    id: str
    title: str
    family: str
    level: Annotated[int, Field(ge=1, le=3)]
    arch: str = "sm_90a"
    required_ptx: Annotated[list[str], Field(min_length=1)]
    forbidden: list[str] = Field(default_factory=lambda: list(FORBIDDABLE))
    statement: str
    baseline: str = Field(description="the library operation timed against, in words")
    inputs: Annotated[list[TensorSpec], Field(min_length=1)]
    outputs: Annotated[list[TensorSpec], Field(min_length=1)]
    scalars: list[ScalarSpec] = Field(default_factory=list)
    shapes: ShapeSets
    tolerance: Tolerance = Tolerance()
    timing: TimingSpec = TimingSpec()
    execution: ExecutionSpec = ExecutionSpec()
    reference: ReferenceSpec = ReferenceSpec()
    solution: str = "solution.cu"
    workspace_bytes: int = 0
    controls: list[ControlSpec] = Field(default_factory=list)
    alternatives: list[AlternativeSpec] = Field(default_factory=list)
    root: Path | None = Field(default=None, description="the task folder; set by the loader")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError(f"id {v!r}: use 2-64 lowercase letters, digits and dashes")
        return v

    @field_validator("arch")
    @classmethod
    def _arch(cls, v: str) -> str:
        if v not in ARCHS:
            raise ValueError(f"arch {v!r} is not one of {sorted(ARCHS)}")
        return v

    @field_validator("forbidden")
    @classmethod
    def _forbidden(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if x not in FORBIDDABLE]
        if bad:
            raise ValueError(f"forbidden: unknown {bad}; known: {list(FORBIDDABLE)}")
        return v

    @model_validator(mode="after")
    def _dims_defined(self) -> TaskSpec:
        names = [t.name for t in (*self.inputs, *self.outputs)] + [s.name for s in self.scalars]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate tensor/scalar names: {sorted(dup)}")
        dims = {d for t in (*self.inputs, *self.outputs) for d in t.shape if isinstance(d, str)}
        for label, sets in (("check", self.shapes.check), ("timing", [self.shapes.timing])):
            for i, s in enumerate(sets):
                missing = dims - set(s)
                if missing:
                    raise ValueError(f"shapes.{label}[{i}] does not set dimension(s) {sorted(missing)}")
                bad = {k: v for k, v in s.items() if v < 1}
                if bad:
                    raise ValueError(f"shapes.{label}[{i}]: dimensions must be positive: {bad}")
        for i in self.shapes.awkward:
            if not 0 <= i < len(self.shapes.check):
                raise ValueError(f"shapes.awkward: index {i} is not a check set")
        for where, expr, shape in (
            ("timing.flops", self.timing.flops, self.shapes.timing),
            ("timing.bytes", self.timing.bytes, self.shapes.timing),
            *(
                (f"execution.min_counts[{k!r}]", v, self.shapes.check[0])
                for k, v in self.execution.min_counts.items()
            ),
        ):
            if expr is not None:
                try:
                    evaluate(expr, shape)
                except ExpressionError as e:
                    raise ValueError(f"{where}: {e}") from None
        unknown = set(self.execution.min_counts) - set(self.required_ptx)
        if unknown:
            raise ValueError(
                f"execution.min_counts names instructions not in required_ptx: {sorted(unknown)}"
            )
        return self

    # -- derived -----------------------------------------------------------------------------------
    @property
    def compute_capability(self) -> tuple[int, int]:
        return ARCHS[self.arch][0]

    @property
    def gencode(self) -> str:
        return ARCHS[self.arch][1]

    def path(self, rel: str) -> Path:
        if self.root is None:
            raise ValueError(f"task {self.id} has no folder; load it with ptxrag.tasks.load_task")
        return self.root / rel

    def solution_source(self) -> str:
        return self.path(self.solution).read_text()

    def resolve_shape(self, tensor: TensorSpec, dims: dict[str, int]) -> list[int]:
        return [d if isinstance(d, int) else dims[d] for d in tensor.shape]
