"""Every reference solution and every negative control of the suite goes through the real sandbox.

Without a GPU (CI): each file compiles with nvcc for its task's arch; the reference passes the static stage
(all required instructions in its SASS, nothing forbidden); controls declared for compile or static fail
exactly there; controls declared for a GPU stage pass compile and static, so they reach the stage that must
catch them. On a Hopper GPU (``-m gpu``) the whole validation runs: the reference passes every stage and each
control fails where it says."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ptxrag.bench.task_validation import GPU_STAGES, TaskValidation, validate_task
from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.tasks import load_task
from ptxrag.tasks.loader import builtin_suite_dir

SUITE_IDS = sorted(p.name for p in builtin_suite_dir().iterdir() if (p / "task.toml").is_file())


#: the parametrized test below; its module fixture validates every selected task at once
_STATIC = "test_reference_and_controls_static"


@pytest.fixture(scope="module")
def static_validations(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, TaskValidation | BaseException]:
    """The CPU-only validation of every task this session selected, two tasks at a time (each compile and
    each cuobjdump is one single-threaded process, so one task at a time left a core idle). A task whose
    validation raised maps to its exception, re-raised by its own test. Tasks with the most controls start
    first, so the two threads finish close together."""
    selected = [
        item.callspec.params["task_id"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == _STATIC
    ]
    selected.sort(key=lambda t: -len(load_task(t).controls))
    out: dict[str, TaskValidation | BaseException] = {}
    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(max_workers=2) as pool:
        home = tmp_path_factory.getbasetemp() / "ptxrag-home"  # conftest's home: this runs before its fixture
        home.mkdir(exist_ok=True)
        mp.setenv("PTXRAG_HOME", str(home))
        futures = {
            t: pool.submit(lambda t: validate_task(load_task(t), Sandbox(gpu=None)), t) for t in selected
        }
        for t, fut in futures.items():
            try:
                out[t] = fut.result()
            except Exception as e:  # reported by that task's test, not by the fixture
                out[t] = e
    return out


@pytest.mark.slow
@pytest.mark.parametrize("task_id", SUITE_IDS)
def test_reference_and_controls_static(
    task_id: str, static_validations: dict[str, TaskValidation | BaseException]
) -> None:
    task = load_task(task_id)
    v = static_validations[task_id]
    if isinstance(v, BaseException):
        raise v
    assert v.task.id == task_id
    ref = v.reference
    assert ref.compile.status == "passed", (
        f"reference does not compile: {ref.compile.message}\n{ref.compile.log}"
    )
    assert ref.static.status == "passed", f"reference fails the static stage: {ref.static.message}"
    assert {p.ptx for p in ref.static.instructions if p.present} == set(task.required_ptx)
    assert ref.correctness.status == "skipped" and ref.success is False, (
        "no GPU here: GPU stages must be skipped"
    )
    assert v.reference_verdict == "not verified"
    for c in v.controls:
        rep = c.report
        assert rep is not None
        if set(c.must_fail_at.split(" or ")) & set(GPU_STAGES):
            assert rep.compile.status == "passed", (
                f"{c.file}: does not compile: {rep.compile.message}\n{rep.compile.log}"
            )
            assert rep.static.status == "passed", (
                f"{c.file}: fails static before reaching {c.must_fail_at}: {rep.static.message}"
            )
            assert c.verdict == "not verified", f"{c.file}: {c.message}"
        else:
            assert c.verdict == "ok", (
                f"{c.file}: must fail at {c.must_fail_at}, got {c.failed_at}: {c.message}"
            )
            assert c.failed_at in c.must_fail_at.split(" or ")
    assert v.ok


@pytest.mark.gpu
@pytest.mark.parametrize("task_id", SUITE_IDS)
def test_full_validation_on_hopper(task_id: str) -> None:
    task = load_task(task_id)
    sandbox = Sandbox(SandboxConfig(stage_limits=StageLimits(correctness_s=30.0)))
    v = validate_task(task, sandbox)
    assert v.reference_verdict == "ok", v.reference.model_dump_json(indent=1)[:4000]
    assert all(e.executed for e in v.reference.execution.instructions)
    for c in v.controls:
        assert c.verdict == "ok", f"{c.file}: must fail at {c.must_fail_at}, got {c.failed_at}: {c.message}"
