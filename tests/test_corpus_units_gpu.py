"""Every template unit kernel on a real Hopper GPU (the lent H200): the reference solution passes every stage
(correct on fresh inputs, its required instructions executed with predicated-on threads > 0, timed) and each
negative control fails at the stage it declares. Skipped without a Hopper GPU; run output goes to
docs/validation/."""

from __future__ import annotations

import pytest

from ptxrag.bench.task_validation import validate_task
from ptxrag.corpus.files import package_dir
from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.tasks.loader import load_task_dir

pytestmark = pytest.mark.gpu

UNIT = package_dir() / "templates" / "unit"
UNITS = sorted(p.name for p in UNIT.iterdir() if (p / "task.toml").is_file())


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(stage_limits=StageLimits(correctness_s=60)))


@pytest.mark.parametrize("name", UNITS)
def test_unit_kernel_on_the_gpu(sandbox, name):
    task = load_task_dir(UNIT / name)
    v = validate_task(task, sandbox, on_progress=print)
    print(v.reference.feedback())
    assert v.reference_verdict == "ok", v.reference.feedback()
    assert all(i.executed for i in v.reference.execution.instructions)
    for c in v.controls:
        assert c.verdict == "ok", f"{c.file}: {c.message}"
