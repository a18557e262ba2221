"""Metric functions on hand-made results whose answers are known."""

from __future__ import annotations

import math

import pytest

from ptxrag.agent_graph.state import TokenUsage
from ptxrag.bench import (
    EpisodeRow,
    aggregate,
    bootstrap_ci,
    compare_conditions,
    fast_p,
    geomean_speedup,
    mcnemar_exact,
    success_at_round,
    success_curves,
)
from ptxrag.bench.failures import normalize_reason, top_failures
from ptxrag.bench.prices import PriceError, load_prices


def row(task: str, cond: str, *, success: bool, speedup: float | None = None, solved: int | None = None,
        sample: int = 0, model: str = "m", static_ok: bool | None = None, rounds: int = 1) -> EpisodeRow:  # fmt: skip
    return EpisodeRow(
        episode_id=f"{task}.{cond}.{model}.{sample}", task_id=task, family="warp", level=1, model=model,
        condition=cond, condition_spec=cond, sample=sample, status="done", max_rounds=4, rounds_used=rounds,
        compiled=True, static_ok=success if static_ok is None else static_ok, correct=success,
        executed=success, success=success, speedup=speedup, solved_round=solved,
        input_tokens=100, output_tokens=10, cost_usd=0.5,
    )  # fmt: skip


def test_fast_p_counts_correct_and_faster_over_all_episodes():
    correct = [True, True, False, True]
    speed = [1.5, 0.8, 3.0, 2.0]  # the 3.0x kernel is wrong: it never counts
    assert fast_p(correct, speed, 0.0) == 0.75
    assert fast_p(correct, speed, 1.0) == 0.5
    assert fast_p(correct, speed, 1.5) == 0.25  # strictly greater: 1.5 is not > 1.5
    assert fast_p(correct, speed, 2.0) == 0.0
    assert fast_p([True, True], [None, 1.2], 1.0) == 0.5  # an untimed success is not fast
    assert fast_p([], [], 1.0) is None
    with pytest.raises(ValueError):
        fast_p([True], [], 1.0)


def test_geometric_mean_speedup_and_its_interval():
    assert geomean_speedup([2.0, 8.0]).value == pytest.approx(4.0)
    e = geomean_speedup([1.0, 4.0, 16.0])
    assert e.value == pytest.approx(4.0) and e.n == 3
    assert 1.0 <= e.ci_low <= 4.0 <= e.ci_high <= 16.0
    same = geomean_speedup([3.0] * 5)
    assert (
        same.value == pytest.approx(3.0)
        and same.ci_low == pytest.approx(3.0)
        and same.ci_high == pytest.approx(3.0)
    )
    assert geomean_speedup([]).value is None and geomean_speedup([0.0, -1.0]).n == 0


def test_bootstrap_interval_of_a_proportion_matches_the_normal_approximation():
    x = [1.0] * 300 + [0.0] * 700
    lo, hi = bootstrap_ci(x)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 1000)  # 0.0284
    assert lo == pytest.approx(0.3 - half, abs=0.006) and hi == pytest.approx(0.3 + half, abs=0.006)
    assert bootstrap_ci(x) == (lo, hi)  # seeded: reproducible
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)


def test_success_at_round_k():
    rates = success_at_round([1, 3, None, 2], 4)
    assert [r.rate for r in rates] == [0.25, 0.5, 0.75, 0.75]
    assert [r.hits for r in rates] == [1, 2, 3, 3] and {r.n for r in rates} == {4}
    assert success_at_round([], 2)[0].rate is None


def test_mcnemar_exact_p_values():
    assert mcnemar_exact(5, 0) == pytest.approx(2 * 0.5**5)  # 0.0625
    assert mcnemar_exact(1, 1) == 1.0 and mcnemar_exact(0, 0) == 1.0
    # 8 vs 2 discordant pairs: 2 * P(X <= 2 | n=10, p=1/2) = 2 * 56/1024
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)


def test_paired_comparison_matches_tasks_and_samples():
    rows = [
        row("t1", "A", success=True), row("t1", "B", success=False),
        row("t2", "A", success=True), row("t2", "B", success=True),
        row("t3", "A", success=False), row("t3", "B", success=False),
        row("t4", "A", success=True), row("t4", "B", success=False),
        row("t5", "A", success=True),  # no partner in B: left out of the pairs
    ]  # fmt: skip
    (c,) = compare_conditions(rows)
    assert (c.condition_a, c.condition_b, c.pairs) == ("A", "B", 4)
    assert (c.both, c.only_a, c.only_b, c.neither) == (1, 2, 0, 1)
    assert c.diff == pytest.approx(0.5) and c.p_value == pytest.approx(0.5)
    assert c.ci_low <= 0.5 <= c.ci_high


def test_aggregate_by_condition():
    rows = [
        row("t1", "A", success=True, speedup=2.0, solved=1, rounds=1),
        row("t2", "A", success=True, speedup=0.5, solved=2, rounds=2),
        row("t3", "A", success=False, rounds=4, static_ok=True),
        row("t1", "B", success=False, rounds=4),
    ]
    a, b = aggregate(rows, ("condition",))
    assert a.group == {"condition": "A"} and a.episodes == 3
    assert a.rates["success"].rate == pytest.approx(2 / 3) and a.rates["static_ok"].hits == 3
    assert a.geomean_speedup.value == pytest.approx(1.0)  # sqrt(2 * 0.5)
    assert a.fast_p == {"fast_0": pytest.approx(2 / 3), "fast_1": pytest.approx(1 / 3), "fast_2": 0.0}
    assert a.mean_rounds == pytest.approx(7 / 3) and a.cost_usd == pytest.approx(1.5)
    assert b.rates["success"].rate == 0.0 and b.geomean_speedup.value is None
    curves = success_curves(rows)
    assert [r.rate for r in curves["A"]] == pytest.approx([1 / 3, 2 / 3, 2 / 3, 2 / 3])
    unpriced = aggregate(
        [*rows[:1], rows[0].model_copy(update={"cost_usd": None, "task_id": "t9"})], ("condition",)
    )
    assert unpriced[0].cost_usd is None  # one unknown price: no total rather than a wrong one


def test_failure_reasons_group_despite_paths_and_numbers():
    a = normalize_reason(
        "compile error: ptxas /tmp/tmpxft_000074c0_00000000-6_candidate.ptx, line 112; error   : Unknown modifier '.i32'"
    )
    b = normalize_reason(
        "compile error: ptxas /tmp/tmpxft_00001023_00000000-6_candidate.ptx, line 87; error : Unknown modifier '.i32'"
    )
    assert a == b == "compile error: ptxas <file>, line N; error : Unknown modifier '.i32'"
    assert normalize_reason("check awkward (n=1000003): 12 of 1000003 differ, max err 3.5e-02\nmore") == (
        "check awkward (n=N): N of N differ, max err N"
    )
    assert len(normalize_reason("x " * 200)) <= 110
    top = top_failures([("warp", "r1"), ("warp", "r2"), ("warp", "r2"), ("tma", "r3"), ("tma", None)], top=1)
    assert top == {"tma": [("r3", 1)], "warp": [("r2", 2)]}


def test_costs_from_the_price_table(tmp_path):
    table = load_prices()
    u = TokenUsage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=400_000)
    # claude-sonnet-4-5: 600k plain input at $3/M + 400k cached at $0.30/M + 100k output at $15/M
    assert table.cost_usd("anthropic:claude-sonnet-4-5", u) == pytest.approx(1.8 + 0.12 + 1.5)
    assert table.cost_usd("replay:/x/y.toml", u) == 0.0
    assert table.cost_usd("openai:my-local-model@http://localhost:8000/v1", u) is None
    own = tmp_path / "p.toml"
    own.write_text('[[price]]\nmatch = "my-local"\ninput = 1.0\noutput = 2.0\n')
    # 600k plain input at $1/M, cache reads free (no price given), 100k output at $2/M
    assert load_prices(own).cost_usd("openai:my-local-model@http://localhost:8000/v1", u) == pytest.approx(
        0.8
    )
    own.write_text('[[price]]\nmatch = "x"\n')
    with pytest.raises(PriceError, match="not valid"):
        load_prices(own)


def test_wilson_interval_is_honest_at_small_n():
    from ptxrag.bench.metrics import rate, wilson_ci

    lo, hi = wilson_ci(0, 2)
    assert lo == 0.0 and hi == pytest.approx(0.6576, abs=1e-3)  # z^2 / (n + z^2)
    lo, hi = wilson_ci(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-3), pytest.approx(0.7634, abs=1e-3))
    lo, hi = wilson_ci(2, 2)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.6576, abs=1e-3)
    assert wilson_ci(0, 0) is None
    with pytest.raises(ValueError):
        wilson_ci(3, 2)
    r = rate([False, False])
    assert r.ci_high is not None and r.ci_high > 0.5  # not the bootstrap's certain [0, 0]


def test_nvcc_intermediate_file_names_are_masked_like_paths() -> None:
    # a contained compile reports ptxas' intermediate file relative to its folder, with a fresh name each time
    a = "compile error: ptxas tmpxft_00007a89_00000000-6_candidate.ptx, line 12; error : Unknown modifier '.i32'"
    b = "compile error: ptxas tmpxft_00007a99_00000000-6_candidate.ptx, line 40; error : Unknown modifier '.i32'"
    assert normalize_reason(a) == normalize_reason(b)
    assert "tmpxft" not in normalize_reason(a) and "'.i32'" in normalize_reason(a)
