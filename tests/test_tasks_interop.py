"""FlashInfer-Trace import/export: real definition fixture, round trips, and what must be refused."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

from ptxrag.tasks import list_tasks, load_task
from ptxrag.tasks.fitrace import Definition, FITraceError, eval_constraint, load_definition, load_workloads
from ptxrag.tasks.interop import export_task, import_definition, source_definition, write_export
from ptxrag.tasks.loader import load_task_dir

FIX = Path(__file__).parent / "fixtures" / "fitrace"
GEMM = FIX / "gemm_n7168_k5120.json"
#: the study's attention forward definition (published fields: names, axes, dtypes, tags, run signature and
#: workload; the description and the body of run are ours, see the fixture's description)
MHA = FIX / "mha_with_lse_d128.json"
MHA_PTX = ["wgmma.mma_async", "cp.async.bulk.tensor.shared::cluster.global", "mbarrier.try_wait.parity"]


def _gemm() -> tuple[Definition, list]:
    d = load_definition(GEMM)
    return d, load_workloads(FIX / "gemm_n7168_k5120.workloads.jsonl", d)


def _mha() -> tuple[Definition, list]:
    d = load_definition(MHA)
    return d, load_workloads(FIX / "mha_with_lse_d128.workloads.jsonl", d)


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
        # the ABI's tensor descriptor carries at most 8 dimensions
        (
            {
                "axes": {**{f"X{i}": {"type": "const", "value": 2} for i in range(9)}, "M": {"type": "var"}},
                "inputs": {"A": {"shape": [f"X{i}" for i in range(9)], "dtype": "bfloat16"}},
            },
            "9 dimensions; the ABI passes at most 8",
        ),
        ({"outputs": {"C-out": {"shape": ["M", "N"], "dtype": "bfloat16"}}}, "not an identifier"),
        # what only the task format can judge arrives as the same one-line error, not a pydantic traceback
        (
            {
                "axes": {
                    "M": {"type": "var"},
                    "N": {"type": "const", "value": 7168},
                    "K": {"type": "const", "value": 1 << 40},
                }
            },
            "cannot be a ptxrag task: .*more than the 141 GB",
        ),
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


def test_import_mha_definition_two_outputs_of_two_precisions(tmp_path: Path) -> None:
    d, w = _mha()
    task = load_task_dir(import_definition(d, w, MHA_PTX, tmp_path).folder)
    assert task.id == "mha-with-lse-d128" and task.family == "attention"
    assert [(t.name, t.dtype, t.shape) for t in task.inputs] == [
        (n, "bfloat16", [4, 48, "S", 128]) for n in "QKV"
    ]
    assert [(t.name, t.dtype, t.shape) for t in task.outputs] == [
        ("O", "bfloat16", [4, 48, "S", 128]),
        ("LSE", "float32", [4, 48, "S"]),
    ]
    # the workload repeats the const axes (B, H, D); only the var axis S is a shape dimension
    assert task.shapes.timing == {"S": 4096}
    assert task.shapes.check == [{"S": 4096}, {"S": 1023}] and task.shapes.awkward == [1]
    # each output is checked at its own dtype's tolerance, not the loosest one for both
    assert task.tolerance_of("LSE").atol < task.tolerance_of("O").atol
    assert task.tolerance_of("LSE").atol == 1e-4 and task.tolerance_of("O").atol == 2e-2
    mod = _load_module(task.path("reference.py"))
    q, k, v = (torch.randn(1, 2, 9, 16, dtype=torch.bfloat16) for _ in range(3))
    out = mod.reference({"Q": q, "K": k, "V": v}, {})
    o, lse = mod.run(q, k, v)
    assert set(out) == {"O", "LSE"} and torch.equal(out["O"], o) and torch.equal(out["LSE"], lse)
    assert out["O"].dtype == torch.bfloat16 and out["LSE"].shape == (1, 2, 9)


def test_mha_round_trip_keeps_axis_names_tensors_and_tags(tmp_path: Path) -> None:
    d, w = _mha()
    task = load_task_dir(import_definition(d, w, MHA_PTX, tmp_path).folder)
    d2 = load_definition(write_export(task, tmp_path / "out")[0])
    w2 = load_workloads(tmp_path / "out" / "mha_with_lse_d128.workloads.jsonl", d2)
    assert d2.name == d.name and d2.op_type == d.op_type
    assert d2.axes == d.axes  # B, H, D const with their values and descriptions, S var: not Q_dim0, ...
    assert d2.inputs == d.inputs and d2.outputs == d.outputs
    assert d2.tags[: len(d.tags)] == d.tags and f"ptxrag:required_ptx={MHA_PTX[0]}" in d2.tags
    assert d2.description == d.description
    again = load_task_dir(import_definition(d2, w2, MHA_PTX, tmp_path / "again").folder)
    for a, b in ((task.inputs, again.inputs), (task.outputs, again.outputs)):
        assert [(t.name, t.dtype, t.shape, t.tolerance) for t in a] == [
            (t.name, t.dtype, t.shape, t.tolerance) for t in b
        ]
    # shapes are re-derived from the exported workloads (the smallest plus an awkward one): the timing shape
    # is kept and no check shape is invented
    assert again.shapes.timing == task.shapes.timing
    assert all(c in task.shapes.check for c in again.shapes.check)
    # the awkward shape survives as an awkward shape
    awkward = [task.shapes.check[i] for i in task.shapes.awkward]
    assert awkward and [again.shapes.check[i] for i in again.shapes.awkward] == awkward
    # exporting again changes nothing (the ptxrag tag is not added twice)
    d3, _ = export_task(again)
    assert d3.model_dump(exclude={"reference"}) == d2.model_dump(exclude={"reference"})


def test_constraints_survive_export(tmp_path: Path) -> None:
    d = Definition.model_validate(_raw(constraints=["M % 1 == 0", "K % 8 == 0"]))
    _, w = _gemm()
    task = load_task_dir(import_definition(d, w, ["wgmma.mma_async"], tmp_path).folder)
    d2, _ = export_task(task)
    assert d2.constraints == d.constraints and d2.axes == d.axes


def test_export_of_an_edited_import_names_its_own_axes(tmp_path: Path) -> None:
    """Once the task's tensors no longer match the kept definition, export must not claim its axes."""
    d, w = _mha()
    folder = import_definition(d, w, MHA_PTX, tmp_path).folder
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml.replace('shape = [4, 48, "S"]', 'shape = [4, 48, "S", 1]', 1))
    task = load_task_dir(folder)
    assert source_definition(task) is None
    d2, _ = export_task(task)
    assert d2.outputs["LSE"].shape == ["LSE_dim0", "LSE_dim1", "S", "LSE_dim3"]
    assert "B" not in d2.axes and d2.name == "mha_with_lse_d128"


@pytest.mark.parametrize(
    ("axes", "says"),
    [
        ({"B": 8, "H": 48, "D": 128, "S": 64}, r"B=8 \(the definition says 4\)"),
        ({"S": 64, "Z": 2}, "does not declare"),
    ],
)
def test_workload_axes_must_agree_with_the_definition(tmp_path: Path, axes: dict, says: str) -> None:
    d, _ = _mha()
    wl = tmp_path / "w.jsonl"
    wl.write_text(json.dumps({"axes": axes, "uuid": "x"}) + "\n")
    with pytest.raises(FITraceError, match=says):
        import_definition(d, load_workloads(wl, d), MHA_PTX, tmp_path / "to")
    assert not (tmp_path / "to").exists()


#: the study's tensor names -> the suite task's (docs/tasks.md, "FlashInfer-Trace: import and export")
MHA_NAMES = {"Q": "q", "K": "k", "V": "v", "O": "o", "LSE": "lse"}


@pytest.mark.parametrize(
    ("study", "ours"),
    [("mha_with_lse_d128", "mha-fwd-lse-d128"), ("mha_with_lse_d128_causal", "mha-fwd-lse-d128-causal")],
)
def test_imported_study_mha_matches_the_suite_task(tmp_path: Path, study: str, ours: str) -> None:
    """The study's mha_with_lse_d128 (and its causal twin) and our mha-fwd-lse-d128 (-causal) hold the same
    tensors: names mapped by MHA_NAMES, the same dtypes, the same shapes wherever the suite's b, h are the
    study's fixed 4, 48 (the timing shape, and s = 1024), and the same numbers from both references."""
    d = load_definition(FIX / f"{study}.json")
    w = load_workloads(FIX / f"{study}.workloads.jsonl", d)
    assert ("causal:true" in d.tags) == ours.endswith("-causal")
    imp = load_task_dir(import_definition(d, w, MHA_PTX, tmp_path).folder)
    suite = load_task(ours)
    assert sorted(MHA_NAMES.values()) == sorted(t.name for t in (*suite.inputs, *suite.outputs))
    by_name = {t.name: t for t in (*suite.inputs, *suite.outputs)}
    assert [MHA_NAMES[t.name] for t in imp.inputs] == [t.name for t in suite.inputs]
    assert [MHA_NAMES[t.name] for t in imp.outputs] == [t.name for t in suite.outputs]
    assert suite.shapes.timing == {"b": 4, "h": 48, "s": imp.shapes.timing["S"]}
    same_bh = [s for s in (*suite.shapes.check, suite.shapes.timing) if (s["b"], s["h"]) == (4, 48)]
    assert len(same_bh) >= 2
    for t in (*imp.inputs, *imp.outputs):
        ours = by_name[MHA_NAMES[t.name]]
        assert t.dtype == ours.dtype
        for dims in same_bh:
            assert imp.resolve_shape(t, {"S": dims["s"]}) == suite.resolve_shape(ours, dims)
    study = _load_module(imp.path("reference.py"))
    ref = _load_module(suite.path(suite.reference.file))
    q, k, v = (torch.randn(1, 3, 37, 128, dtype=torch.float64) for _ in range(3))
    got = study.reference({"Q": q, "K": k, "V": v}, {})
    want = ref.reference({"q": q, "k": k, "v": v}, {})
    assert set(got) == set(MHA_NAMES) - {"Q", "K", "V"}
    for name, t in got.items():
        torch.testing.assert_close(t.double(), want[MHA_NAMES[name]], atol=1e-5, rtol=1e-5)


def test_cli_import_then_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ptxrag tasks import` and `ptxrag tasks export` as a user runs them, on the study's attention definition."""
    from typer.testing import CliRunner

    from ptxrag.cli import app

    runner = CliRunner()
    ptx = [x for p in MHA_PTX for x in ("--required-ptx", p)]
    wl = str(FIX / "mha_with_lse_d128.workloads.jsonl")
    res = runner.invoke(
        app, ["tasks", "import", str(MHA), "--workloads", wl, *ptx, "--to", str(tmp_path / "t")]
    )
    assert res.exit_code == 0, res.output
    assert "timing shape {'S': 4096}" in res.output
    monkeypatch.setenv("PTXRAG_TASKS_PATH", str(tmp_path / "t"))
    res = runner.invoke(app, ["tasks", "export", "mha-with-lse-d128", "--to", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    d2 = load_definition(tmp_path / "out" / "mha_with_lse_d128.json")
    assert d2.axes == load_definition(MHA).axes
    # the same import again: refused with one line, nothing overwritten
    res = runner.invoke(
        app, ["tasks", "import", str(MHA), "--workloads", wl, *ptx, "--to", str(tmp_path / "t")]
    )
    assert res.exit_code == 2 and "exists" in res.output


def test_every_suite_task_export_reads_back_and_imports_again(tmp_path: Path) -> None:
    """The written files, not only the models: a scalar input's `"shape": null` must survive the JSON (the
    schema requires the key), and import must give back the task's tensors, or refuse integer inputs."""
    scalars_seen = 0
    for task in list_tasks():
        paths = write_export(task, tmp_path / task.id)
        d = load_definition(paths[0])
        w = load_workloads(paths[1], d)
        assert [n for n, t in d.inputs.items() if t.shape is None] == [s.name for s in task.scalars]
        scalars_seen += len(task.scalars)
        if any(t.dtype.startswith(("int", "uint")) for t in task.inputs):
            with pytest.raises(FITraceError, match="structured values"):
                import_definition(d, w, task.required_ptx, tmp_path / "again")
            continue
        again = load_task_dir(import_definition(d, w, task.required_ptx, tmp_path / "again").folder)
        assert [(s.name, s.value) for s in again.scalars] == [(s.name, s.value) for s in task.scalars]
        dims, dims2 = task.shapes.timing, again.shapes.timing
        assert [(t.name, t.dtype, task.resolve_shape(t, dims)) for t in (*task.inputs, *task.outputs)] == [
            (t.name, t.dtype, again.resolve_shape(t, dims2)) for t in (*again.inputs, *again.outputs)
        ]
    assert scalars_seen  # the suite has tasks with scalars, so the null shape is exercised


def test_a_scalar_input_becomes_a_task_scalar_with_the_workloads_value(tmp_path: Path) -> None:
    """A definition variant with the softmax scale as a scalar input (shape null), as other attention
    definitions have it: the timing workload's value becomes the task scalar and reaches run()."""
    data = json.loads(MHA.read_text())
    data["inputs"]["sm_scale"] = {"shape": None, "dtype": "float32"}
    data["reference"] = (
        "import torch\n\n\ndef run(Q, K, V, sm_scale):\n"
        "    s = torch.matmul(Q.float(), K.float().transpose(-2, -1)) * sm_scale\n"
        "    lse = torch.logsumexp(s, dim=-1)\n"
        "    return torch.matmul(torch.exp(s - lse[..., None]), V.float()).to(Q.dtype), lse\n"
    )
    d = Definition.model_validate(data)
    wl = tmp_path / "w.jsonl"
    row = {"axes": {"S": 64}, "uuid": "u", "inputs": {"sm_scale": {"type": "scalar", "value": 0.25}}}
    wl.write_text(json.dumps(row) + "\n")
    task = load_task_dir(import_definition(d, load_workloads(wl, d), MHA_PTX, tmp_path / "t").folder)
    assert [(s.name, s.value) for s in task.scalars] == [("sm_scale", 0.25)]
    assert [t.name for t in task.inputs] == ["Q", "K", "V"]
    mod = _load_module(task.path("reference.py"))
    q, k, v = (torch.randn(1, 1, 5, 8) for _ in range(3))
    out = mod.reference({"Q": q, "K": k, "V": v}, {"sm_scale": 0.25})
    torch.testing.assert_close(out["LSE"], torch.logsumexp(q @ k.transpose(-2, -1) * 0.25, dim=-1))
    # the export keeps it a scalar (shape null) under the same name
    d2 = load_definition(write_export(task, tmp_path / "out")[0])
    assert d2.inputs["sm_scale"].shape is None
    # a workload that gives no value for it: refused, nothing written
    wl.write_text(json.dumps({"axes": {"S": 64}, "uuid": "u"}) + "\n")
    with pytest.raises(FITraceError, match="scalar input sm_scale"):
        import_definition(d, load_workloads(wl, d), MHA_PTX, tmp_path / "t2")
    assert not (tmp_path / "t2").exists()


def test_export_refuses_a_dtype_flashinfer_trace_cannot_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from ptxrag.cli import app

    src = load_task("bulk-copy-scale").root
    assert src is not None
    dst = tmp_path / "tasks" / "bulk-copy-f64"
    shutil.copytree(src, dst)
    toml = (dst / "task.toml").read_text().replace('id = "bulk-copy-scale"', 'id = "bulk-copy-f64"')
    (dst / "task.toml").write_text(toml.replace('dtype = "float32"', 'dtype = "float64"'))
    task = load_task_dir(dst)
    with pytest.raises(FITraceError, match=r"no dtype for .*\(float64\)"):
        export_task(task)
    monkeypatch.setenv("PTXRAG_TASKS_PATH", str(tmp_path / "tasks"))
    res = CliRunner().invoke(app, ["tasks", "export", "bulk-copy-f64", "--to", str(tmp_path / "out")])
    assert res.exit_code == 2 and "float64" in res.output and not (tmp_path / "out").exists()
