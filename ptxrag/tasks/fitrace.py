"""FlashInfer-Trace data models: the task format of FlashInfer-Bench and of the PTXBench study.

A *definition* names an operator: its axes (``const`` with a value, or ``var``), its input and output tensors
(shapes made of axis names, a dtype), a Python ``reference`` defining ``run(...)`` and optional
``constraints`` (Python expressions over the axes). A *workload* gives the ``var`` axes' values and says how
each input is produced. The models below follow the published schema of the ``flashinfer-bench`` package
(0.1.2); that package is not a dependency because it requires a CUDA torch and flashinfer-python.
Unknown keys are kept (``extra="allow"``) so a definition survives a round trip unchanged.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ptxrag.base.errors import TaskInputError

NonEmpty = Annotated[str, Field(min_length=1)]

#: dtypes the FlashInfer-Trace schema allows.
FI_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
)


class FITraceError(TaskInputError, ValueError):
    """A definition or workload file is malformed or cannot be mapped; the message says what to change."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class AxisConst(_Model):
    type: Literal["const"] = "const"
    value: Annotated[int, Field(ge=0)]
    description: str | None = None


class AxisVar(_Model):
    type: Literal["var"] = "var"
    description: str | None = None


class FITensor(_Model):
    #: None for a scalar input.
    shape: list[NonEmpty] | None
    dtype: Literal[FI_DTYPES]  # type: ignore[valid-type]
    description: str | None = None


class Definition(_Model):
    name: NonEmpty
    op_type: NonEmpty
    axes: dict[NonEmpty, Annotated[AxisConst | AxisVar, Field(discriminator="type")]]
    inputs: dict[NonEmpty, FITensor]
    outputs: dict[NonEmpty, FITensor]
    reference: NonEmpty
    tags: list[NonEmpty] = Field(default_factory=list)
    description: str | None = None
    constraints: list[NonEmpty] = Field(default_factory=list)

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: str) -> str:
        try:
            tree = ast.parse(v)
        except SyntaxError as e:
            raise ValueError(f"reference is not valid Python: {e}") from e
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
            raise ValueError("reference must define a top-level function run(...)")
        return v

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, v: list[str]) -> list[str]:
        for c in v:
            try:
                ast.parse(c, mode="eval")
            except SyntaxError as e:
                raise ValueError(f"constraint {c!r} is not a Python expression: {e}") from e
        return v

    @property
    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if isinstance(a, AxisVar)]

    @property
    def const_axes(self) -> dict[str, int]:
        return {n: a.value for n, a in self.axes.items() if isinstance(a, AxisConst)}


class RandomInput(_Model):
    type: Literal["random"] = "random"


class ScalarInput(_Model):
    type: Literal["scalar"] = "scalar"
    value: int | float | bool


class SafetensorsInput(_Model):
    type: Literal["safetensors"] = "safetensors"
    path: NonEmpty
    tensor_key: NonEmpty


class Workload(_Model):
    axes: dict[str, Annotated[int, Field(ge=0)]]
    inputs: dict[
        str, Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]
    ] = Field(default_factory=dict)
    uuid: NonEmpty


def definition_json(d: Definition) -> str:
    """``d`` as the JSON of a definition file: unset optional fields left out, but a scalar's ``"shape": null``
    kept (the schema requires the key; leaving it out makes the file unreadable, here and in flashinfer-bench)."""
    data = d.model_dump(mode="json", exclude_none=True)
    for role in ("inputs", "outputs"):
        for name, t in getattr(d, role).items():
            if t.shape is None:
                data[role][name]["shape"] = None
    return json.dumps(data, indent=2) + "\n"


def validation_message(e: ValidationError) -> str:
    """A pydantic error as one line: where, and what is wrong."""
    return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors())


def load_definition(path: Path) -> Definition:
    """Read one definition JSON file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FITraceError(f"{path}: cannot read a JSON definition: {e}") from None
    try:
        return Definition.model_validate(data)
    except ValidationError as e:
        raise FITraceError(f"{path}: not a FlashInfer-Trace definition: {validation_message(e)}") from None


def load_workloads(path: Path, definition: Definition | None = None) -> list[Workload]:
    """Read a workloads JSONL file: one workload per line, or one trace per line with a ``workload`` key.

    With ``definition`` given, lines whose trace names another definition are skipped.
    """
    out: list[Workload] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise FITraceError(f"{path}: cannot read workloads: {e}") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise FITraceError(f"{path}:{i}: not a JSON line: {e}") from None
        if isinstance(obj, dict) and "workload" in obj:
            if definition is not None and obj.get("definition") not in (None, definition.name):
                continue
            obj = obj["workload"]
        try:
            out.append(Workload.model_validate(obj))
        except ValidationError as e:
            raise FITraceError(
                f"{path}:{i}: not a FlashInfer-Trace workload: {validation_message(e)}"
            ) from None
    if not out:
        raise FITraceError(f"{path}: no workloads" + (f" for {definition.name}" if definition else ""))
    return out


_ALLOWED = (
    ast.Expression,
    ast.Compare,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
)


def eval_constraint(expr: str, axes: dict[str, int]) -> bool:
    """Evaluate a constraint over axis values without running arbitrary code (arithmetic and comparisons
    of names and numbers only). Raises FITraceError for anything else."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise FITraceError(
                f"constraint {expr!r} uses {type(node).__name__}; only arithmetic and comparisons over "
                "axis names can be checked"
            )
        if isinstance(node, ast.Name) and node.id not in axes:
            raise FITraceError(f"constraint {expr!r} names {node.id!r}, which is not an axis")
    code = compile(tree, "<constraint>", "eval")
    return bool(eval(code, {"__builtins__": {}}, dict(axes)))  # noqa: S307 - checked node types above
