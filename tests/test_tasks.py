"""The bundled task suite: every spec loads, the suite covers the instruction families of issue 3, and each
task's PyTorch reference agrees with its library baseline (run on the CPU, small shapes)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from ptxrag.cli import app
from ptxrag.tasks import TaskSpec, list_tasks, load_task
from ptxrag.tasks.loader import builtin_suite_dir

SUITE_IDS = sorted(p.name for p in builtin_suite_dir().iterdir() if (p / "task.toml").is_file())

#: instruction families the first suite must cover (issue 3), each as PTX names in the opcode table
FAMILIES: dict[str, list[str]] = {
    "TMA tensor load": ["cp.async.bulk.tensor.shared::cluster.global"],
    "TMA tensor store with proxy fence and bulk groups": [
        "cp.async.bulk.tensor.global.shared::cta",
        "fence.proxy.async",
        "cp.async.bulk.commit_group",
    ],
    "1-D bulk copy": ["cp.async.bulk.shared::cluster.global"],
    "bulk reduction": ["cp.reduce.async.bulk.global.shared::cta"],
    "mbarrier pipeline": ["mbarrier.init", "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity"],
    "wgmma": ["wgmma.mma_async"],
    "setmaxnreg": ["setmaxnreg.inc", "setmaxnreg.dec"],
    "stmatrix / ldmatrix": ["stmatrix", "ldmatrix"],
    "warp redux / elect": ["redux.sync", "elect.sync"],
    "cluster barrier + DSMEM": ["barrier.cluster.arrive", "barrier.cluster.wait", "st.async"],
    "TMA multicast": ["cp.async.bulk.tensor.shared::cluster.global.multicast::cluster"],
    "programmatic dependent launch": ["griddepcontrol.wait", "griddepcontrol.launch_dependents"],
    "sm_80 control": ["cp.async", "mma.sync"],
}


def test_suite_size_levels_and_ids() -> None:
    tasks = list_tasks()
    ids = [t.id for t in tasks]
    assert sorted(ids) == SUITE_IDS, "list_tasks must return exactly the bundled folders"
    assert len(tasks) >= 12
    assert {t.level for t in tasks} == {1, 2, 3}
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_is_required_by_some_task(family: str) -> None:
    required = {p for t in list_tasks() for p in t.required_ptx}
    missing = [p for p in FAMILIES[family] if p not in required]
    assert not missing, f"{family}: no task requires {missing}"


def test_control_kinds_cover_every_failure_stage() -> None:
    stages = {s for t in list_tasks() for c in t.controls for s in c.stages}
    assert {"compile", "static", "correctness", "execution"} <= stages
    for t in list_tasks():
        assert t.controls, f"{t.id} has no negative control"


@pytest.mark.parametrize("task_id", SUITE_IDS)
def test_spec_is_complete(task_id: str) -> None:
    t = load_task(task_id)
    assert t.root is not None and t.root.name == task_id
    assert len(t.statement.strip()) > 200, (
        "the statement is what a model sees: say what to build and with what"
    )
    assert t.baseline.strip()
    assert t.solution_source().lstrip().startswith("//"), (
        "a reference solution opens with a comment on its design"
    )
    for c in t.controls:
        assert t.path(c.file).read_text().lstrip().startswith("// Control"), (
            f"{c.file}: say what the control does"
        )
        assert c.why.strip()
    # awkward shapes exist wherever shapes can be awkward
    assert t.shapes.awkward, f"{task_id}: no awkward check shape"
    timing_bytes = sum(_numel(t, x, t.shapes.timing) * x_bytes(x.dtype) for x in (*t.inputs, *t.outputs))
    assert timing_bytes >= 64 * 2**20, f"{task_id}: the timing shape moves only {timing_bytes / 2**20:.0f} MB"


def x_bytes(dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


def _numel(task: TaskSpec, tensor: Any, dims: dict[str, int]) -> int:
    n = 1
    for d in task.resolve_shape(tensor, dims):
        n *= d
    return n


def _load_reference(task: TaskSpec) -> tuple[Callable[..., Any], Callable[..., Any]]:
    spec = importlib.util.spec_from_file_location(
        f"ref_{task.id.replace('-', '_')}", task.path(task.reference.file)
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, task.reference.function), getattr(mod, task.reference.baseline_function)


def _small_dims(task: TaskSpec) -> dict[str, int]:
    """Distinct small sizes (multiples of 16), so a swapped dimension changes a shape."""
    names = list(task.shapes.check[0])
    sizes = [48, 32, 80, 16, 64]
    return {n: sizes[i % len(sizes)] for i, n in enumerate(names)}


def _make_input(dtype: str, shape: list[int], init: Any, gen: torch.Generator) -> torch.Tensor:
    if init.kind == "randint":
        return torch.randint(int(init.low), int(init.high), shape, generator=gen).to(getattr(torch, dtype))
    if init.kind == "uniform":
        x = torch.rand(shape, generator=gen) * (init.high - init.low) + init.low
    else:
        x = torch.randn(shape, generator=gen) * init.std + init.mean
    return x.to(getattr(torch, dtype))


@pytest.mark.parametrize("task_id", SUITE_IDS)
def test_reference_agrees_with_baseline_on_cpu(task_id: str) -> None:
    """The float64 reference and the library op it is timed against compute the same function, within the
    task's own tolerance (so the tolerance is reachable by a float32/bf16 implementation)."""
    task = load_task(task_id)
    reference, baseline = _load_reference(task)
    dims = _small_dims(task)
    gen = torch.Generator().manual_seed(1234)
    inputs = {x.name: _make_input(x.dtype, task.resolve_shape(x, dims), x.init, gen) for x in task.inputs}
    scalars = {s.name: s.value for s in task.scalars}
    ref_in = inputs
    if task.reference.precision == "float64":
        ref_in = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    ref = reference(ref_in, dict(scalars))
    base = baseline(inputs, dict(scalars))
    for out in task.outputs:
        shape = task.resolve_shape(out, dims)
        assert list(ref[out.name].shape) == shape, (
            f"reference output {out.name} has shape {list(ref[out.name].shape)}"
        )
        assert list(base[out.name].shape) == shape
        r, b = ref[out.name].double(), base[out.name].double()
        err = (b - r).abs()
        tol = task.tolerance_of(out.name)
        allowed = tol.atol + tol.rtol * r.abs()
        assert bool((err <= allowed).all()), (
            f"{out.name}: baseline differs from reference by {float(err.max()):.3g}"
        )
        assert float(r.abs().max()) > 0, "a reference of zeros proves nothing"


def test_cli_lists_and_shows_the_suite() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "list", "--json"])
    assert res.exit_code == 0, res.output
    listed = {t["id"]: t for t in json.loads(res.output)}
    assert sorted(listed) == SUITE_IDS
    assert "setmaxnreg.inc" in listed["gemm-ws-setmaxnreg-bf16"]["required_ptx"]
    res = runner.invoke(app, ["tasks", "show", "gemm-tma-multicast-bf16"])
    assert res.exit_code == 0, res.output
    assert "multicast::cluster" in res.output and "controls/dead_multicast.cu" in res.output


def test_generated_attention_controls_are_current() -> None:
    """The mha-fwd controls are the reference plus one planted bug each (scripts/gen-mha-fwd-controls.py): after
    a solution changes they must be regenerated, or they would test a kernel the reference no longer is."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "gen-mha-fwd-controls.py"
    spec = importlib.util.spec_from_file_location("gen_mha_fwd_controls", script)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    generated = gen.outputs()
    assert len(generated) == 12
    for path, text in generated.items():
        assert path.read_text() == text, f"{path.name} is stale: run python scripts/gen-mha-fwd-controls.py"
        solution = (path.parents[1] / "solution.cu").read_text()
        assert text != solution and text.lstrip().startswith("// Control")
    declared = {
        load_task(t).path(c.file)
        for t in ("mha-fwd-lse-d128", "mha-fwd-lse-d128-causal")
        for c in load_task(t).controls
    }
    assert declared == set(generated), "every generated control is declared in its task.toml, and only those"


def test_generated_attention_backward_files_are_current() -> None:
    """The causal backward solution and every mha-bwd control are the non-causal solution plus one planted change
    each (scripts/gen-mha-bwd-controls.py): a stale file would test a kernel the reference no longer is."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "gen-mha-bwd-controls.py"
    spec = importlib.util.spec_from_file_location("gen_mha_bwd_controls", script)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    generated = gen.outputs()
    tasks = ("mha-bwd-d128", "mha-bwd-d128-causal")
    causal_solution = load_task(tasks[1]).path("solution.cu")
    assert causal_solution in generated
    for path, text in generated.items():
        assert path.read_text() == text, f"{path.name} is stale: run python scripts/gen-mha-bwd-controls.py"
        if path != causal_solution:
            solution = (path.parents[1] / "solution.cu").read_text()
            assert text != solution and text.lstrip().startswith("// Control")
    declared = {load_task(t).path(c.file) for t in tasks for c in load_task(t).controls}
    assert declared == set(generated) - {causal_solution}, (
        "every generated control is declared, and only those"
    )


@pytest.mark.parametrize("task_id", ["mha-bwd-d128", "mha-bwd-d128-causal"])
def test_attention_backward_tolerance_admits_the_kernel_numerics(task_id: str) -> None:
    """The mha-bwd tolerances were derived from a CPU emulation of the reference kernel's numerics (bf16 P and
    dS, fp32 accumulation, scripts/mha-bwd-tolerance.py): that emulation must pass them at an awkward check
    shape, and a kernel that drops the diagonal key (a causal mask off by one, or a key missing) must not."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "mha-bwd-tolerance.py"
    spec = importlib.util.spec_from_file_location("mha_bwd_tolerance", script)
    assert spec is not None and spec.loader is not None
    tol_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tol_mod)
    task = load_task(task_id)
    reference, _ = _load_reference(task)
    causal = task_id.endswith("causal")
    gen = torch.Generator().manual_seed(99)
    dims = {"b": 1, "h": 2, "s": 333}
    x = {t.name: _make_input(t.dtype, task.resolve_shape(t, dims), t.init, gen) for t in task.inputs}
    ref = reference({k: v.double() for k, v in x.items()}, {})
    emu = tol_mod.emulate(x, causal)
    bad = tol_mod.emulate(
        x, causal, drop_diagonal=True
    )  # one key per row missing, as an off-by-one mask does

    def within(out: dict[str, torch.Tensor], name: str) -> bool:
        tol, r = task.tolerance_of(name), ref[name]
        return bool(((out[name].double() - r).abs() <= tol.atol + tol.rtol * r.abs()).all())

    for name in ("dq", "dk", "dv"):
        assert within(emu, name), f"{name}: the kernel's own numerics exceed the tolerance"
    assert not all(within(bad, n) for n in ("dq", "dk", "dv")), (
        "dropping the diagonal key must exceed the tolerance"
    )
