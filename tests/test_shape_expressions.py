"""Shape expressions in task files (roofline FLOPs/bytes, minimum instruction counts): arithmetic only."""

from __future__ import annotations

import pytest

from ptxrag.base.expr import ExpressionError, evaluate
from ptxrag.tasks import load_task
from ptxrag.tasks.spec import TaskSpec


def test_arithmetic_over_dimensions():
    assert evaluate("2*m*n*k", {"m": 2, "n": 3, "k": 4}) == 48
    assert evaluate("ceil(n/128)*32 + max(m, 1) - 1", {"n": 129, "m": 5}) == 68


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "m.__class__",
        "open('x')",
        "lambda: 1",
        "[m]",
        "m if m else n",
        "q*2",
        "2*",
    ],
)
def test_anything_but_arithmetic_is_refused(expr):
    with pytest.raises(ExpressionError):
        evaluate(expr, {"m": 1, "n": 2})


def test_task_with_a_bad_expression_or_unknown_instruction_does_not_load():
    base = load_task("warp-reduce-redux").model_dump(exclude={"root"})
    bad = {**base, "timing": {**base["timing"], "flops": "rows*nope"}}
    with pytest.raises(ValueError, match="unknown dimension 'nope'"):
        TaskSpec.model_validate(bad)
    bad = {**base, "execution": {"min_counts": {"mma.sync": "rows"}}}
    with pytest.raises(ValueError, match="not in required_ptx"):
        TaskSpec.model_validate(bad)
    ok = {**base, "execution": {"min_counts": {base["required_ptx"][0]: "rows*cols/32"}}}
    assert TaskSpec.model_validate(ok).execution.min_counts
