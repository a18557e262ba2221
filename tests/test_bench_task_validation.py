"""The instruction check of ``ptxrag tasks validate`` (ptxrag/bench/task_validation.py): every required_ptx
of a task must be an instruction whose execution the sandbox's opcode table can prove. It moved out of the
task loader so that tasks import no sandbox code; these are the loader's former cases, and the bundled
suite, which CI now checks here instead of at load time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ptxrag.bench.task_validation import check_required_ptx, validate_task
from ptxrag.sandbox import EvaluationReport
from ptxrag.tasks import TaskError, TaskSpec, builtin_suite_dir, list_tasks, load_task_dir


def _task_requiring(tmp_path: Path, ptx: str) -> TaskSpec:
    """A copy of a bundled task whose required_ptx is ``[ptx]``; it loads (the loader does not judge it)."""
    dst = tmp_path / "warp-reduce-redux"
    shutil.copytree(builtin_suite_dir() / "warp-reduce-redux", dst)
    spec = dst / "task.toml"
    text = spec.read_text()
    assert 'required_ptx = ["redux.sync"]' in text, "fixture drifted"
    spec.write_text(text.replace('required_ptx = ["redux.sync"]', f'required_ptx = ["{ptx}"]'))
    return load_task_dir(dst)


@pytest.mark.parametrize(
    ("ptx", "words"),
    [
        ("redux.sinc", ["'redux.sinc'", "not in the opcode table"]),
        (
            "mapa",
            ["'mapa'", "no distinctive SASS opcode", "require an instruction the opcode table can verify"],
        ),
    ],
)
def test_an_unprovable_instruction_is_rejected_naming_the_spec(
    tmp_path: Path, ptx: str, words: list[str]
) -> None:
    task = _task_requiring(tmp_path, ptx)
    with pytest.raises(TaskError) as err:
        check_required_ptx(task)
    msg = str(err.value)
    assert str(task.path("task.toml")) in msg, msg
    for w in words:
        assert w in msg, msg


def test_every_bundled_task_requires_only_provable_instructions() -> None:
    tasks = list_tasks()
    assert len(tasks) >= 10  # the suite, not an empty search path
    for task in tasks:
        check_required_ptx(task)  # raises TaskError naming the task's spec


class _Recording:
    """An Evaluator double that records what it was asked to evaluate."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        self.calls.append(task.id)
        raise AssertionError("must not be reached")


def test_validation_stops_at_an_unprovable_instruction_before_evaluating(tmp_path: Path) -> None:
    task = _task_requiring(tmp_path, "mapa")
    evaluator = _Recording()
    with pytest.raises(TaskError, match="no distinctive SASS opcode"):
        validate_task(task, evaluator)
    assert evaluator.calls == []


class _Scripted:
    """An Evaluator double: the reference passes every stage; every other kernel ends at ``stage`` with
    ``status`` (``error``: the harness broke there, ``failed``: the kernel was caught there)."""

    def __init__(self, task: TaskSpec, stage: str, status: str) -> None:
        self.task, self.stage, self.status = task, stage, status

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        from ptxrag.sandbox.results import (
            CompileResult,
            CorrectnessResult,
            ExecutionResult,
            MutationResult,
            StaticResult,
            TimingResult,
        )

        reference = source == task.solution_source()
        order = ["compile", "static", "correctness", "execution", "mutation", "timing"]
        cut = len(order) if reference else order.index(self.stage)
        kinds = [
            CompileResult,
            StaticResult,
            CorrectnessResult,
            ExecutionResult,
            MutationResult,
            TimingResult,
        ]
        stages = {}
        for i, (name, kind) in enumerate(zip(order, kinds, strict=True)):
            status = "passed" if i < cut else self.status if i == cut else "skipped"
            stages[name] = kind(status=status, message=f"{name} {status}")
        return EvaluationReport(
            task_id=task.id, source_sha256="0" * 64, arch=task.arch, success=reference, **stages
        )


def _control_at(task: TaskSpec, stage: str):
    return next(c for c in task.controls if stage in c.stages)


@pytest.mark.parametrize(("status", "verdict"), [("failed", "ok"), ("error", "FAILED")])
def test_a_control_is_credited_only_when_caught_not_when_the_harness_broke(status: str, verdict: str) -> None:
    """A harness error at a control's declared stage (an H200 run of 2026-12-04 had one: a helper library
    missing) judged nothing; counting it as the control failing where declared would hide a blind check."""
    task = next(t for t in list_tasks() if t.id == "bulk-copy-scale")
    control = _control_at(task, "correctness")
    result = validate_task(task, _Scripted(task, "correctness", status))
    outcome = next(c for c in result.controls if c.file == control.file)
    assert outcome.verdict == verdict
    if status == "error":
        assert "harness error at correctness" in outcome.message
        assert not result.ok
