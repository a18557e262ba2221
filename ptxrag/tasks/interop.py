"""FlashInfer-Trace definitions <-> ptxrag task folders (``ptxrag tasks import`` / ``export``).

Import writes task.toml, a reference.py that keeps the definition's ``run`` and wraps it in ptxrag's
``reference(inputs, scalars)`` ABI, and a solution.cu that stops compilation until someone writes a solution.
Check shapes are the smallest workload plus an awkward one (each var axis made odd and below 1024); the
timing shape is the largest workload. Export writes the reverse: a definition JSON and one workload per
check/timing shape.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .fitrace import (
    FI_DTYPES,
    AxisConst,
    AxisVar,
    Definition,
    FITensor,
    FITraceError,
    ScalarInput,
    Workload,
    definition_json,
    eval_constraint,
    load_definition,
    validation_message,
)
from .spec import DTYPES, TaskSpec

_FLOAT = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
_TOL = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 1e-2)}
#: (atol, rtol) for an output dtype _TOL does not list (the float8 formats)
_TOL_OTHER = (2e-2, 1e-2)

#: the most dimensions a tensor descriptor of the ABI carries (PTXRAG_MAX_DIMS in ptxrag_abi.h)
_MAX_DIMS = 8
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: the copy of the definition an imported task folder keeps (export reuses its axis names)
DEFINITION_COPY = "definition.json"


@dataclass(frozen=True)
class Imported:
    folder: Path
    check: list[dict[str, int]]
    timing: dict[str, int]
    notes: list[str]


def _toml_value(v: object) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)  # numbers, and strings (a JSON string is a valid TOML basic string)


def to_toml(spec: dict[str, object]) -> str:
    """The small TOML writer task.toml needs: scalars first, then tables, then arrays of tables."""
    lines: list[str] = []
    tables: list[tuple[str, list[dict[str, object]], bool]] = []  # (name, rows, is an array of tables)
    for k, v in spec.items():
        if isinstance(v, dict):
            tables.append((k, [v], False))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v, True))
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    for k, rows, array in tables:
        for row in rows:
            lines += ["", f"[[{k}]]" if array else f"[{k}]"]
            lines += [f"{kk} = {_toml_value(x)}" for kk, x in row.items()]
    return "\n".join(lines) + "\n"


def task_id_for(name: str) -> str:
    tid = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if len(tid) < 2:
        raise FITraceError(f"definition name {name!r} gives no usable task id; pass --id")
    return tid[:64]


def _check_mappable(d: Definition) -> None:
    for role, tensors in (("input", d.inputs), ("output", d.outputs)):
        for n, t in tensors.items():
            if t.dtype not in DTYPES:
                raise FITraceError(
                    f"{d.name}: {role} {n} has dtype {t.dtype}, which ptxrag tasks cannot hold"
                )
            if role == "output" and t.shape is None:
                raise FITraceError(f"{d.name}: output {n} is a scalar; ptxrag outputs must be tensors")
            if role == "input" and t.shape is not None and t.dtype not in _FLOAT:
                raise FITraceError(
                    f"{d.name}: input {n} is an {t.dtype} tensor (indices or lengths need structured values; "
                    "ptxrag draws random inputs), so this definition cannot be imported"
                )
            if not _IDENT.match(n):
                raise FITraceError(
                    f"{d.name}: {role} name {n!r} is not an identifier, which ptxrag tensor names must be"
                )
            if len(t.shape or []) > _MAX_DIMS:
                raise FITraceError(
                    f"{d.name}: {role} {n} has {len(t.shape or [])} dimensions; the ABI passes at most {_MAX_DIMS}"
                )
            for ax in t.shape or []:
                if ax not in d.axes:
                    raise FITraceError(f"{d.name}: {role} {n} uses axis {ax!r}, which is not declared")


def _check_workload_axes(d: Definition, w: Workload) -> None:
    """A workload may repeat the const axes (the study's workloads do) but must agree with the definition."""
    unknown = sorted(set(w.axes) - set(d.axes))
    if unknown:
        raise FITraceError(f"workload {w.uuid} sets axes {unknown}, which {d.name} does not declare")
    const = d.const_axes
    wrong = [
        f"{k}={v} (the definition says {const[k]})" for k, v in w.axes.items() if k in const and v != const[k]
    ]
    if wrong:
        raise FITraceError(f"workload {w.uuid} gives const axes other values: {', '.join(wrong)}")


def _size(axes: dict[str, int]) -> int:
    return math.prod(axes.values()) if axes else 1


def _awkward(base: dict[str, int]) -> dict[str, int]:
    out = {}
    for k, v in base.items():
        w = min(v, 1024)
        w = w - 1 if w > 1 and w % 2 == 0 else w
        out[k] = max(1, w)
    return out


def _ok(d: Definition, axes: dict[str, int]) -> bool:
    full = {**d.const_axes, **axes}
    return all(eval_constraint(c, full) for c in d.constraints)


def _reference_py(d: Definition) -> str:
    ins = list(d.inputs)
    outs = list(d.outputs)
    call = ", ".join(
        f"{n}=inputs[{n!r}]" if d.inputs[n].shape is not None else f"{n}=scalars[{n!r}]" for n in ins
    )
    return (
        f"# Imported from the FlashInfer-Trace definition {d.name!r} by `ptxrag tasks import`.\n"
        "# The definition's reference follows unchanged; reference() adapts it to ptxrag's ABI.\n\n"
        f"{d.reference.rstrip()}\n\n\n"
        "def reference(inputs, scalars):\n"
        f"    out = run({call})\n"
        f"    names = {outs!r}\n"
        "    if not isinstance(out, (tuple, list)):\n"
        "        out = (out,)\n"
        "    if len(out) != len(names):\n"
        "        raise ValueError(f'run returned {len(out)} values, the definition declares {len(names)}')\n"
        "    return dict(zip(names, out))\n\n\n"
        "def baseline(inputs, scalars):\n"
        "    return reference(inputs, scalars)\n"
    )


def import_definition(
    d: Definition,
    workloads: list[Workload],
    required_ptx: list[str],
    to: Path,
    arch: str = "sm_90a",
    task_id: str | None = None,
    level: int = 2,
) -> Imported:
    """Write a ptxrag task folder for ``d`` under ``to``; returns the folder and the shapes chosen."""
    _check_mappable(d)
    if not required_ptx:
        raise FITraceError("name at least one required PTX instruction (--required-ptx)")
    var = d.var_axes
    notes: list[str] = []
    for w in workloads:
        missing = set(var) - set(w.axes)
        if missing:
            raise FITraceError(f"workload {w.uuid} does not set var axes {sorted(missing)}")
        _check_workload_axes(d, w)
        if any(i.type == "safetensors" for i in w.inputs.values()):
            notes.append(f"workload {w.uuid}: safetensors inputs are replaced by fresh random inputs")
    if var and not workloads:
        raise FITraceError(f"{d.name} has var axes {var}; pass --workloads FILE.jsonl to give their values")
    pick = [{k: w.axes[k] for k in var} for w in workloads] or [{}]
    timing_w = max(range(len(pick)), key=lambda i: _size(pick[i]))
    timing = pick[timing_w]
    check = [min(pick, key=_size)]
    awk = _awkward(check[0])
    awkward_idx: list[int] = []
    if var and awk == check[0] and any(v > 1 for v in awk.values()):
        awkward_idx = [0]  # the smallest workload is already awkward (e.g. a re-import of an export)
    elif var and awk != check[0]:
        if _ok(d, awk):
            check.append(awk)
            awkward_idx = [1]
        else:
            notes.append(f"awkward shape {awk} breaks the definition's constraints; none added")
    scalars = []
    for n, t in d.inputs.items():
        if t.shape is None:
            src = workloads[timing_w].inputs.get(n) if workloads else None
            if not isinstance(src, ScalarInput):
                raise FITraceError(f"scalar input {n}: the timing workload gives no scalar value for it")
            scalars.append({"name": n, "value": float(src.value)})

    def tensor(n: str, t: FITensor) -> dict[str, object]:
        shape = [d.const_axes.get(a, a) for a in (t.shape or [])]
        return {"name": n, "dtype": t.dtype, "shape": shape}

    tid = task_id or task_id_for(d.name)
    out_dtypes = [t.dtype for t in d.outputs.values()]
    atol, rtol = max((_TOL.get(x, _TOL_OTHER) for x in out_dtypes), key=lambda p: p[0])
    own_tolerance = len(set(out_dtypes)) > 1  # e.g. attention's bf16 o and fp32 lse

    def output(n: str, t: FITensor) -> dict[str, object]:
        spec = tensor(n, t)
        if own_tolerance:
            o_atol, o_rtol = _TOL.get(t.dtype, _TOL_OTHER)
            spec["tolerance"] = {"atol": o_atol, "rtol": o_rtol}
        return spec

    statement = (
        f"{d.description or d.name}\n\n"
        f"Imported from the FlashInfer-Trace definition `{d.name}` (op type {d.op_type}). Implement the same "
        "operation as its reference `run` (in reference.py) as a CUDA kernel using: "
        + ", ".join(f"`{p}`" for p in required_ptx)
        + "."
        + ("\nConstraints on the axes: " + "; ".join(d.constraints) if d.constraints else "")
    )
    spec = {
        "id": tid,
        "title": f"{d.name} ({d.op_type}, imported from FlashInfer-Trace)",
        "family": d.op_type,
        "level": level,
        "arch": arch,
        "required_ptx": list(required_ptx),
        "baseline": f"the definition's PyTorch reference run() for {d.name}",
        "statement": statement,
        "inputs": [tensor(n, t) for n, t in d.inputs.items() if t.shape is not None],
        "outputs": [output(n, t) for n, t in d.outputs.items()],
        "scalars": scalars,
        "shapes": {"check": check, "timing": timing, "awkward": awkward_idx},
        "tolerance": {"atol": atol, "rtol": rtol},
        "reference": {"precision": "native"},
    }
    try:
        TaskSpec.model_validate(spec)  # fail before writing anything
    except ValidationError as e:
        # what only the task format can judge, e.g. one call's tensors beyond the GPU's memory
        raise FITraceError(f"{d.name}: cannot be a ptxrag task: {validation_message(e)}") from None
    folder = to / tid
    if folder.exists():
        raise FITraceError(f"{folder} exists; remove it or choose another --to / --id")
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(to_toml(spec))
    (folder / "reference.py").write_text(_reference_py(d))
    (folder / DEFINITION_COPY).write_text(definition_json(d))
    (folder / "solution.cu").write_text(
        f'#error "{tid}: imported task without a reference solution yet; write one in this file"\n'
    )
    return Imported(folder, check, timing, notes)


def source_definition(task: TaskSpec) -> Definition | None:
    """The definition an imported task was made from (the folder's definition.json), if the task's tensors
    and scalars still match it: the same names in order, dtypes, and dimensions (a const axis's value where
    the task has a number, a var axis's name where it has a name). None for any other task, or one edited
    since import, whose export then names its fixed dimensions itself."""
    if task.root is None or not (task.root / DEFINITION_COPY).is_file():
        return None
    try:
        d = load_definition(task.root / DEFINITION_COPY)
    except FITraceError:
        return None
    if [n for n, t in d.inputs.items() if t.shape is None] != [s.name for s in task.scalars]:
        return None
    for fi_tensors, specs in ((d.inputs, task.inputs), (d.outputs, task.outputs)):
        shaped = {n: t.shape for n, t in fi_tensors.items() if t.shape is not None}
        if list(shaped) != [t.name for t in specs]:
            return None
        for t in specs:
            if fi_tensors[t.name].dtype != t.dtype or len(shaped[t.name]) != len(t.shape):
                return None
            if any(d.const_axes.get(ax, ax) != dim for ax, dim in zip(shaped[t.name], t.shape, strict=True)):
                return None
    return d


def export_task(task: TaskSpec) -> tuple[Definition, list[Workload]]:
    """The FlashInfer-Trace form of a task: its definition and one workload per check and timing shape.

    A task imported from a definition (and not changed since, see source_definition) exports with that
    definition's name, axes (their names and descriptions), constraints, description and tags; any other
    task names each fixed dimension ``<tensor>_dim<i>``."""
    unnamed = [f"{t.name} ({t.dtype})" for t in (*task.inputs, *task.outputs) if t.dtype not in FI_DTYPES]
    if unnamed:
        raise FITraceError(
            f"{task.id}: FlashInfer-Trace has no dtype for {', '.join(unnamed)}; it names {', '.join(FI_DTYPES)}"
        )
    orig = source_definition(task)
    axes: dict[str, AxisConst | AxisVar] = dict(orig.axes) if orig else {}
    for t in (*task.inputs, *task.outputs):
        for d in t.shape:
            if isinstance(d, str):
                axes.setdefault(d, AxisVar())

    def shape_of(t_name: str, shape: list[int | str]) -> list[str]:
        if orig is not None:
            return list((orig.inputs.get(t_name) or orig.outputs[t_name]).shape or [])
        names = []
        for i, d in enumerate(shape):
            if isinstance(d, int):
                n = f"{t_name}_dim{i}"
                axes[n] = AxisConst(value=d)
                names.append(n)
            else:
                names.append(d)
        return names

    inputs = {t.name: FITensor(shape=shape_of(t.name, list(t.shape)), dtype=t.dtype) for t in task.inputs}
    for s in task.scalars:
        inputs[s.name] = orig.inputs[s.name] if orig else FITensor(shape=None, dtype="float32")
    outputs = {t.name: FITensor(shape=shape_of(t.name, list(t.shape)), dtype=t.dtype) for t in task.outputs}
    src = task.path(task.reference.file).read_text()
    args = [*(t.name for t in task.inputs), *(s.name for s in task.scalars)]
    tensors = "{" + ", ".join(f"{n!r}: {n}" for n in (t.name for t in task.inputs)) + "}"
    scal = "{" + ", ".join(f"{s.name!r}: {s.name}" for s in task.scalars) + "}"
    outs = [t.name for t in task.outputs]
    ret = ", ".join(f"_out[{n!r}]" for n in outs)
    wrapper = (
        f"\n\n\ndef run({', '.join(args)}):\n"
        f"    _out = {task.reference.function}({tensors}, {scal})\n"
        f"    return {ret}\n"
    )
    if "def run(" in src:
        wrapper = ""  # an imported task already carries the definition's run
    ptx_tags = [f"ptxrag:required_ptx={p}" for p in task.required_ptx]
    definition = Definition(
        name=orig.name if orig else task.id.replace("-", "_"),
        op_type=task.family,
        axes=axes,
        inputs=inputs,
        outputs=outputs,
        reference=src.rstrip() + wrapper,
        description=orig.description if orig and orig.description else task.title,
        tags=[*(x for x in (orig.tags if orig else []) if x not in ptx_tags), *ptx_tags],
        constraints=list(orig.constraints) if orig else [],
    )
    workloads = []
    for i, dims in enumerate([*task.shapes.check, task.shapes.timing]):
        var = {k: v for k, v in dims.items() if k in axes}
        ins: dict[str, object] = {t.name: {"type": "random"} for t in task.inputs}
        ins.update({s.name: {"type": "scalar", "value": s.value} for s in task.scalars})
        label = "timing" if i == len(task.shapes.check) else f"check{i}"
        workloads.append(Workload.model_validate({"axes": var, "inputs": ins, "uuid": f"{task.id}-{label}"}))
    return definition, workloads


def write_export(task: TaskSpec, to: Path) -> list[Path]:
    definition, workloads = export_task(task)
    to.mkdir(parents=True, exist_ok=True)
    dpath = to / f"{definition.name}.json"
    wpath = to / f"{definition.name}.workloads.jsonl"
    dpath.write_text(definition_json(definition))
    wpath.write_text("".join(json.dumps(w.model_dump(mode="json")) + "\n" for w in workloads))
    return [dpath, wpath]
