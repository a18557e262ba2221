"""FlashInfer-Trace import/export: real definition fixture, round trips, and what must be refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from ptxrag.tasks import list_tasks
from ptxrag.tasks.fitrace import Definition, FITraceError, eval_constraint, load_definition, load_workloads
from ptxrag.tasks.interop import export_task, import_definition, write_export
from ptxrag.tasks.loader import load_task_dir

FIX = Path(__file__).parent / "fixtures" / "fitrace"
GEMM = FIX / "gemm_n7168_k5120.json"


def _gemm() -> tuple[Definition, list]:
    d = load_definition(GEMM)
    return d, load_workloads(FIX / "gemm_n7168_k5120.workloads.jsonl", d)


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"ref_{path.parent.name}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _raw(**over) -> dict:
    data = json.loads(GEMM.read_text())
    data.update(over)
    return data


def test_import_gemm_definition(tmp_path: Path) -> None:
    d, w = _gemm()
    r = import_definition(d, w, ["wgmma.mma_async", "cp.async.bulk.tensor"], tmp_path)
    task = load_task_dir(r.folder)
    assert task.id == "gemm-n7168-k5120"
    assert task.shapes.timing == {"M": 8192}
    assert task.shapes.check[0] == {"M": 128}
    awk = task.shapes.check[task.shapes.awkward[0]]["M"]
    assert awk % 2 == 1 and awk != 128
    assert [t.shape for t in task.inputs] == [["M", 5120], [7168, 5120]]
    assert task.outputs[0].dtype == "bfloat16"
    # the wrapped reference computes what the definition's run computes
    mod = _load_module(r.folder / "reference.py")
    a, b = torch.randn(5, 16, dtype=torch.bfloat16), torch.randn(7, 16, dtype=torch.bfloat16)
    out = mod.reference({"A": a, "B": b}, {})
    assert set(out) == {"C"} and torch.equal(out["C"], a @ b.T)
    assert "#error" in (r.folder / "solution.cu").read_text()


def test_round_trip_keeps_tensors_and_shapes(tmp_path: Path) -> None:
    d, w = _gemm()
    task = load_task_dir(import_definition(d, w, ["wgmma.mma_async"], tmp_path).folder)
    paths = write_export(task, tmp_path / "out")
    d2 = load_definition(paths[0])
    w2 = load_workloads(paths[1], d2)
    assert d2.name == d.name and d2.op_type == d.op_type and d2.var_axes == d.var_axes
    for role in ("inputs", "outputs"):
        a, b = getattr(d, role), getattr(d2, role)
        assert list(a) == list(b)
        for n in a:
            assert a[n].dtype == b[n].dtype
            for axes in ({"M": 8192}, {"M": 3}):
                full1, full2 = {**d.const_axes, **axes}, {**d2.const_axes, **axes}
                assert [full1[x] for x in a[n].shape] == [full2[x] for x in b[n].shape]
    assert [x.axes for x in w2][-1] == {"M": 8192}
    again = load_task_dir(import_definition(d2, w2, ["wgmma.mma_async"], tmp_path / "again").folder)
    assert again.shapes.timing == task.shapes.timing


def test_every_suite_task_exports_a_valid_definition() -> None:
    tasks = list_tasks()
    assert tasks
    for task in tasks:
        d, w = export_task(task)
        Definition.model_validate(d.model_dump())
        assert len(w) == len(task.shapes.check) + 1
        for t in task.inputs:
            for i, x in enumerate(t.shape):
                ax = d.axes[d.inputs[t.name].shape[i]]  # type: ignore[index]
                assert (getattr(ax, "value", None) == x) if isinstance(x, int) else ax.type == "var"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"inputs": {"A": {"shape": ["M", "K"], "dtype": "float4_e2m1"}}}, "float4_e2m1"),
        ({"inputs": {"A": {"shape": ["M", "K"], "dtype": "int32"}}}, "structured values"),
        ({"inputs": {"A": {"shape": ["M", "Q"], "dtype": "bfloat16"}}}, "not declared"),
        ({"outputs": {"C": {"shape": None, "dtype": "float32"}}}, "scalar"),
    ],
)
def test_unmappable_definitions_are_refused(tmp_path: Path, change: dict, says: str) -> None:
    d = Definition.model_validate(_raw(**change))
    _, w = _gemm()
    with pytest.raises(FITraceError, match=says):
        import_definition(d, w, ["wgmma.mma_async"], tmp_path)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_bad_files_give_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "d.json"
    bad.write_text(json.dumps(_raw(reference="def main(A, B):\n    return A")))
    with pytest.raises(FITraceError, match="run"):
        load_definition(bad)
    bad.write_text("{not json")
    with pytest.raises(FITraceError, match="JSON"):
        load_definition(bad)
    wl = tmp_path / "w.jsonl"
    wl.write_text('{"axes": {"M": 4}}\n')
    with pytest.raises(FITraceError, match="uuid"):
        load_workloads(wl)
    d, _ = _gemm()
    with pytest.raises(FITraceError, match="--workloads"):
        import_definition(d, [], ["wgmma.mma_async"], tmp_path)
    wl.write_text('{"definition": "other", "workload": {"axes": {"M": 4}, "uuid": "x"}}\n')
    with pytest.raises(FITraceError, match="no workloads"):
        load_workloads(wl, d)


def test_existing_folder_is_not_overwritten(tmp_path: Path) -> None:
    d, w = _gemm()
    import_definition(d, w, ["wgmma.mma_async"], tmp_path)
    with pytest.raises(FITraceError, match="exists"):
        import_definition(d, w, ["wgmma.mma_async"], tmp_path)


def test_constraints_are_evaluated_safely() -> None:
    assert eval_constraint("M % 2 == 0 and M <= 16", {"M": 8})
    assert not eval_constraint("M % 2 == 0", {"M": 7})
    for hostile in ("__import__('os').system('true')", "M.__class__", "[x for x in ()]"):
        with pytest.raises(FITraceError):
            eval_constraint(hostile, {"M": 8})
    with pytest.raises(FITraceError, match="not an axis"):
        eval_constraint("Z > 1", {"M": 8})


def test_awkward_shape_breaking_a_constraint_is_dropped(tmp_path: Path) -> None:
    d = Definition.model_validate(_raw(constraints=["M % 64 == 0"]))
    _, w = _gemm()
    r = import_definition(d, w, ["wgmma.mma_async"], tmp_path)
    assert r.check == [{"M": 128}] and any("constraints" in n for n in r.notes)


def test_toml_writer_survives_awkward_text(tmp_path: Path) -> None:
    import tomllib

    from ptxrag.tasks.interop import to_toml

    spec = {"s": 'quote " back\\slash\nnewline ü \t tab ]]', "n": [1, 2.5], "t": {"x": [{"a": 1}]}}
    spec["rows"] = [{"k": "v"}, {"k": "w"}]
    assert tomllib.loads(to_toml(spec)) == spec
