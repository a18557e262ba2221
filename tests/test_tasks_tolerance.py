"""Per-output tolerances: an output may carry its own (attention's bf16 o and fp32 lse), an input may not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ptxrag.tasks import load_task
from ptxrag.tasks.spec import TaskSpec


def test_an_output_is_checked_with_its_own_tolerance_else_the_tasks():
    task = load_task("mha-fwd-lse-d128")
    assert task.tolerance_of("lse").atol == 1e-3 and task.tolerance_of("lse").rtol == 1e-3
    assert task.tolerance_of("o") == task.tolerance and task.tolerance.atol == 5e-3


def test_a_tolerance_on_an_input_is_refused():
    data = load_task("mha-fwd-lse-d128").model_dump()
    data["inputs"][0]["tolerance"] = {"atol": 1.0, "rtol": 0.0}
    with pytest.raises(ValidationError, match="applies to outputs only"):
        TaskSpec.model_validate(data)


def test_a_negative_output_tolerance_is_refused():
    data = load_task("mha-fwd-lse-d128").model_dump()
    data["outputs"][1]["tolerance"] = {"atol": -1.0, "rtol": 0.0}
    with pytest.raises(ValidationError):
        TaskSpec.model_validate(data)


def test_the_worker_job_carries_each_outputs_tolerance(tmp_path):
    from ptxrag.sandbox.worker_client import worker_job

    task = load_task("mha-fwd-lse-d128")
    job = worker_job(task, tmp_path / "c.so", tmp_path / "r.py")
    by_name = {o["name"]: o.get("tolerance") for o in job["outputs"]}
    assert by_name == {"o": None, "lse": {"atol": 1e-3, "rtol": 1e-3}}
