"""The task format: one folder per task with ``task.toml``, ``reference.py``, a reference solution and
negative controls. This module holds the typed, validated form of ``task.toml``.

The format is deliberately plain TOML + Python so other projects can read it without ptxrag.
See docs/tasks.md for a walk-through.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ptxrag.base.errors import TaskInputError
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

#: bytes per element of each dtype (what one input or output of that dtype occupies in GPU memory)
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "uint32": 4,
    "int16": 2,
}

#: value ranges of the integer dtypes (randint draws must fit the tensor they fill)
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

#: largest finite value of each floating dtype (an init that reaches past it draws inf)
FLOAT_MAX: dict[str, float] = {
    "float32": 3.4028234663852886e38,
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float64": 1.7976931348623157e308,
    "float8_e4m3fn": 448.0,
    "float8_e5m2": 57344.0,
}
#: a normal init reaches mean +- this many standard deviations (beyond that, draws are negligibly rare)
NORMAL_REACH = 8

#: the ABI describes shapes, element counts and byte sizes as int64 (docs/abi.md)
INT64_MAX = 2**63 - 1

#: more check shape sets than this is a spec error, not a thorough task (each one is a GPU run)
MAX_CHECK_SETS = 32

#: memory cap for an arch no hardware card in ptxrag/corpus/hardware describes: the largest card's
#: memory is used then (see gpu_memory_bytes); this is the cap if no card can be read at all
FALLBACK_GPU_MEMORY_BYTES = 192 * 10**9

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

#: a task id: also the folder name, so never a path (no "/", no "..")
TASK_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{1,63}$"
_ID_RE = re.compile(TASK_ID_PATTERN)


def is_task_id(s: str) -> bool:
    """Whether ``s`` has the form of a task id (``$`` alone would let a trailing newline through)."""
    return _ID_RE.fullmatch(s) is not None


_DIM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TaskError(TaskInputError, ValueError):
    """A task folder or spec is broken. The message names the file and what to fix."""


class _Frozen(BaseModel):
    # every float in a task spec must be finite: a nan tolerance accepts anything, an inf one too
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


#: the largest GPU memory of each compute capability among the hardware cards (ptxrag/corpus/hardware), in
#: bytes: kept here so that tasks do not depend on corpus (the layering contract); a test checks it against
#: the cards (tests/test_tasks_hardening.py)
LARGEST_GPU_MEMORY: dict[tuple[int, int], tuple[int, str]] = {
    (9, 0): (141 * 10**9, "h200"),
    (10, 0): (180 * 10**9, "b200"),
}


@cache
def gpu_memory_bytes(arch: str) -> tuple[int, str]:
    """(bytes, where the number comes from): the memory of the largest GPU of ``arch``'s compute capability
    (LARGEST_GPU_MEMORY); for an arch no card describes, the largest of any arch. One call's inputs,
    outputs and workspace must fit in it."""
    cc = ARCHS[arch][0] if arch in ARCHS else None
    if cc in LARGEST_GPU_MEMORY:
        mem, name = LARGEST_GPU_MEMORY[cc]
        return mem, f"the largest {arch} GPU in the hardware cards ({name})"
    if not LARGEST_GPU_MEMORY:
        return FALLBACK_GPU_MEMORY_BYTES, "the fallback cap (no hardware card)"
    mem, name = max(LARGEST_GPU_MEMORY.values())
    return mem, f"the largest GPU of any arch in the hardware cards ({name})"


def _size(n: int) -> str:
    for unit, scale in (("EB", 10**18), ("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


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


class Tolerance(_Frozen):
    atol: Annotated[float, Field(ge=0.0)] = 1e-5
    rtol: Annotated[float, Field(ge=0.0)] = 1e-5


class TensorSpec(_Frozen):
    """An input or output tensor: a name, a dtype and a shape made of dimension names or integers."""

    name: str
    dtype: Dtype
    shape: list[Dim]
    init: InitSpec = InitSpec()
    #: an output's own |out - ref| <= atol + rtol |ref| (outputs of different precision in one task, e.g.
    #: attention's bf16 o and fp32 lse); None: the task's tolerance
    tolerance: Tolerance | None = None

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
            if isinstance(d, int) and d > INT64_MAX:
                raise ValueError(f"dimension {d} does not fit in int64")
        return v

    @model_validator(mode="after")
    def _init_fits_dtype(self) -> TensorSpec:
        """Drawn values must be representable: an init that overflows the dtype fills the input with inf."""
        init = self.init
        if self.dtype in INT_RANGES:
            if init.kind == "randint":
                lo, hi = INT_RANGES[self.dtype]
                # torch.randint draws from [low, high): high may be one past the largest value
                if not (lo <= init.low and init.high <= hi + 1):
                    raise ValueError(
                        f"tensor {self.name!r}: init range [{init.low:g}, {init.high:g}) does not fit "
                        f"{self.dtype} ({lo}..{hi})"
                    )
            return self
        top = FLOAT_MAX[self.dtype]
        reach = (
            abs(init.mean) + NORMAL_REACH * init.std
            if init.kind == "normal"
            else max(abs(init.low), abs(init.high))
        )
        if reach > top:
            raise ValueError(
                f"tensor {self.name!r}: init {init.kind} reaches {reach:g}, beyond the largest finite "
                f"{self.dtype} ({top:g}); draws would overflow to inf"
            )
        return self


class ScalarSpec(_Frozen):
    name: str
    value: float


class ShapeSets(_Frozen):
    """Dimension values. ``check`` sets drive correctness (fresh inputs each); ``timing`` drives timing."""

    check: Annotated[list[dict[str, int]], Field(min_length=1, max_length=MAX_CHECK_SETS)]
    timing: dict[str, int]
    awkward: list[int] = Field(
        default_factory=list,
        description="indexes into `check` of the awkward shapes (not multiples of the natural tile)",
    )


class TimingSpec(_Frozen):
    warmup: Annotated[int, Field(ge=0, le=1000)] = 5
    reps: Annotated[int, Field(ge=1, le=10000)] = 30
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
    max_plausible_speedup: Annotated[float, Field(gt=0.0)] | None = None


class ExecutionSpec(_Frozen):
    """How much of each required instruction one profiled call must execute (predicated-on thread count)."""

    #: instruction -> minimum count as an expression of the check shape's dimensions
    min_counts: dict[str, str] = Field(default_factory=dict)
    #: without an expression: this fraction of the reference solution's count (recorded by `tasks validate`)
    min_fraction_of_reference: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1


class ControlSpec(_Frozen):
    """A negative control: a kernel that must fail, at the declared stage."""

    file: str
    #: the stage, or the stages, one of which must stop it (a list where the stage depends on a random
    #: choice of the evaluator, e.g. which call is profiled)
    must_fail_at: Stage | list[Stage]
    why: str

    @property
    def stages(self) -> tuple[Stage, ...]:
        return tuple(self.must_fail_at) if isinstance(self.must_fail_at, list) else (self.must_fail_at,)

    @property
    def stages_label(self) -> str:
        return " or ".join(self.stages)


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
    #: scratch memory the sandbox allocates for each call (counted in the memory bound below)
    workspace_bytes: Annotated[int, Field(ge=0)] = 0
    controls: list[ControlSpec] = Field(default_factory=list)
    alternatives: list[AlternativeSpec] = Field(default_factory=list)
    root: Path | None = Field(default=None, description="the task folder; set by the loader")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not is_task_id(v):
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

    def tolerance_of(self, output: str) -> Tolerance:
        """The tolerance an output is checked with: its own, else the task's."""
        own = next((t.tolerance for t in self.outputs if t.name == output), None)
        return own or self.tolerance

    @model_validator(mode="after")
    def _dims_defined(self) -> TaskSpec:
        for t in self.inputs:
            if t.tolerance is not None:
                raise ValueError(f"input {t.name!r}: a tolerance applies to outputs only")
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
                huge = {k: v for k, v in s.items() if v > INT64_MAX}
                if huge:
                    raise ValueError(f"shapes.{label}[{i}]: dimensions do not fit in int64: {huge}")
                self._check_memory(f"shapes.{label}[{i}]", s)
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

    def _check_memory(self, where: str, dims: dict[str, int]) -> None:
        """One call's inputs, outputs and workspace at ``dims`` must fit in int64 and in the GPU's memory
        (the sandbox needs several times this: private copies, guard bytes, rotating timing buffers)."""
        limit, source = gpu_memory_bytes(self.arch)
        total = self.workspace_bytes
        for t in (*self.inputs, *self.outputs):
            numel = math.prod(d if isinstance(d, int) else dims[d] for d in t.shape)
            nbytes = numel * DTYPE_BYTES[t.dtype]
            if nbytes > INT64_MAX:
                raise ValueError(
                    f"{where}: tensor {t.name!r} has {numel} elements, {nbytes} bytes: beyond int64"
                )
            total += nbytes
        if total > limit:
            raise ValueError(
                f"{where}: inputs, outputs and workspace take {_size(total)}, more than the {_size(limit)} of "
                f"{source}; use smaller shapes"
            )

    # -- derived -----------------------------------------------------------------------------------
    @property
    def compute_capability(self) -> tuple[int, int]:
        return ARCHS[self.arch][0]

    @property
    def gencode(self) -> str:
        return ARCHS[self.arch][1]

    def path(self, rel: str) -> Path:
        """``rel`` inside the task folder; a path that leads outside it (``..``, absolute, a symlink out)
        raises TaskError."""
        if self.root is None:
            raise ValueError(f"task {self.id} has no folder; load it with ptxrag.tasks.load_task")
        return inside_folder(self.root, rel, f"task {self.id}")

    def solution_source(self) -> str:
        return self.path(self.solution).read_text()

    def resolve_shape(self, tensor: TensorSpec, dims: dict[str, int]) -> list[int]:
        return [d if isinstance(d, int) else dims[d] for d in tensor.shape]


def inside_folder(folder: Path, rel: str, what: str) -> Path:
    """``folder / rel`` if it resolves (symlinks followed) inside ``folder``, else TaskError naming ``what``."""
    if not rel or Path(rel).is_absolute():
        raise TaskError(f"{what}: path {rel!r} must be relative to the task folder")
    root = folder.resolve()
    p = (folder / rel).resolve()
    if not p.is_relative_to(root):
        raise TaskError(
            f"{what}: path {rel!r} leads outside the task folder {folder} (to {p}); keep task files inside it"
        )
    return folder / rel
