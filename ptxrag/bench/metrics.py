"""Study metrics on episode rows: rates with Wilson 95% intervals, success@round-k, pass@k, geometric-mean
speedup over successes, fast_p, and paired comparisons between conditions.

Definitions:
- rate: the fraction of episodes with the property; its interval is the Wilson score interval, which stays
  honest at small n and at 0 or n hits (0/2 gives [0%, 66%], where a bootstrap would print [0%, 0%]).
- success@k: the fraction of episodes solved within their first k rounds.
- geometric-mean speedup: over the successful episodes that were timed (speedup = baseline time /
  candidate time); the interval is the bootstrap over those episodes.
- fast_p, as KernelBench defines it: (1/N) * #{episodes that are correct and have speedup > p}, N counting
  every episode (failed ones included). "Correct" here is ptxrag's success: compiled, correct output, and
  every target instruction executed. fast_0 is the success rate of timed episodes.
- GPU not run: a group whose episodes include some whose GPU stages never ran and none whose GPU stages
  gave a verdict has no known correct/executed/success rate (``gpu_not_run``); reports print "n/a".
- pass@k over samples, with the unbiased estimator of Chen et al. (2021): for a task with n episodes of
  which c succeeded, pass@k = 1 - C(n-c, k) / C(n, k), averaged over tasks (k <= n).
- paired comparison of conditions A and B: episodes matched on (task, model, sample); the difference of
  success rates with Newcombe's paired score interval (Wilson-based), and the exact two-sided McNemar test on the pairs
  where only one condition succeeded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .records import EpisodeRow

N_BOOT = 2000
SEED = 20261202
FAST_P = (0.0, 1.0, 2.0)
RATE_FIELDS = ("compiled", "static_ok", "correct", "executed", "success")
#: rates only the GPU stages can decide (unknown when they never ran)
GPU_FIELDS = ("correct", "executed", "success")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Rate(_Frozen):
    hits: int
    n: int
    rate: float | None = Field(description="hits / n; None when n is 0")
    ci_low: float | None = None
    ci_high: float | None = None


class Estimate(_Frozen):
    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None


class GroupSummary(_Frozen):
    """Aggregates over the episodes of one group (e.g. one condition and model)."""

    group: dict[str, str | int]
    episodes: int
    rates: dict[str, Rate] = Field(description="compiled, static_ok, correct, executed, success")
    unverified: int = Field(description="episodes whose GPU stages never ran")
    gpu_not_run: bool = Field(
        False, description="no episode's GPU stages gave a verdict (and some were skipped): GPU rates unknown"
    )
    mean_rounds: float | None
    mean_rounds_to_success: float | None = Field(None, description="mean solved round over solved episodes")
    mean_rounds_to_static: float | None = Field(
        None, description="mean first round with every target instruction in the SASS, where reached"
    )
    geomean_speedup: Estimate
    fast_p: dict[str, float | None] = Field(description="'fast_0', 'fast_1', 'fast_2'")
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    cost_usd: float | None = Field(description="total; None when any episode's model has no price")


class PairedComparison(_Frozen):
    group: dict[str, str | int]
    condition_a: str
    condition_b: str
    pairs: int
    both: int
    only_a: int
    only_b: int
    neither: int
    diff: float | None = Field(description="success rate of A minus that of B over the pairs")
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = Field(description="exact two-sided McNemar test; None without pairs")


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat`` (default: the mean) over ``values``; None when empty.
    ``stat`` takes an (n_boot, n) array and returns n_boot statistics."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    samples = x[idx]
    stats = stat(samples) if stat is not None else samples.mean(axis=1)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def wilson_ci(hits: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial rate ``hits / n``; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= hits <= n:
        raise ValueError(f"wilson_ci: hits ({hits}) must be between 0 and n ({n})")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(flags: Iterable[bool]) -> Rate:
    x = [bool(f) for f in flags]
    if not x:
        return Rate(hits=0, n=0, rate=None)
    ci = wilson_ci(sum(x), len(x))
    assert ci is not None
    return Rate(hits=sum(x), n=len(x), rate=sum(x) / len(x), ci_low=ci[0], ci_high=ci[1])


def success_at_round(solved_rounds: Sequence[int | None], max_rounds: int) -> list[Rate]:
    """Entry k-1: the fraction of episodes solved in round k or earlier (None: never solved)."""
    return [rate(r is not None and r <= k for r in solved_rounds) for k in range(1, max_rounds + 1)]


def geomean_speedup(speedups: Sequence[float]) -> Estimate:
    """Geometric mean of positive speedups, with a bootstrap interval."""
    s = [float(x) for x in speedups if x is not None and x > 0 and math.isfinite(x)]
    if not s:
        return Estimate(value=None, n=0)
    logs = np.log(np.asarray(s))
    ci = bootstrap_ci(logs.tolist())
    assert ci is not None
    return Estimate(
        value=float(np.exp(logs.mean())), n=len(s), ci_low=math.exp(ci[0]), ci_high=math.exp(ci[1])
    )


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float) -> float | None:
    """KernelBench's fast_p: the fraction of ALL episodes that are correct and faster than p x baseline."""
    if len(correct) != len(speedups):
        raise ValueError(f"{len(correct)} correctness flags but {len(speedups)} speedups")
    if not correct:
        return None
    hits = sum(1 for c, s in zip(correct, speedups, strict=True) if c and s is not None and s > p)
    return hits / len(correct)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs against 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(
    a: Sequence[bool], b: Sequence[bool]
) -> tuple[int, int, int, int, float | None, tuple[float, float] | None]:
    """(both, only_a, only_b, neither, diff, 95% interval of diff) for aligned outcome lists; the interval is
    Newcombe's score interval for a difference of paired proportions (his method 10), built from the
    Wilson intervals of both rates, so 0 of 4 against 0 of 4 reads [-0.49, +0.49], not [0, 0]."""
    if len(a) != len(b):
        raise ValueError("paired outcomes must have the same length")
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    neither = len(a) - both - only_a - only_b
    if not a:
        return both, only_a, only_b, neither, None, None
    return (
        both,
        only_a,
        only_b,
        neither,
        (only_a - only_b) / len(a),
        newcombe_paired_ci(both, only_a, only_b, neither),
    )


def newcombe_paired_ci(
    both: int, only_a: int, only_b: int, neither: int, level: float = 0.95
) -> tuple[float, float]:
    """Newcombe (1998) method 10: interval of p_A - p_B for paired binary outcomes."""
    n = both + only_a + only_b + neither
    if n <= 0:
        raise ValueError("newcombe_paired_ci needs at least one pair")
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    ci1, ci2 = wilson_ci(both + only_a, n, level), wilson_ci(both + only_b, n, level)
    assert ci1 is not None and ci2 is not None
    (l1, u1), (l2, u2) = ci1, ci2
    cross = both * neither - only_a * only_b
    denom = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    num = max(cross - n / 2, 0.0) if cross > 0 else float(cross)
    phi = num / math.sqrt(denom) if denom > 0 else 0.0
    d = p1 - p2
    lo = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, lo), min(1.0, hi)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def gpu_not_run(rows: Sequence[EpisodeRow]) -> bool:
    """True when some episodes skipped the GPU stages and none had them decide (passed the CPU stages with
    a verdict from correctness/execution): their correct, executed and success rates are unknown."""
    verdicts = sum(1 for r in rows if r.static_ok and not r.unverified)
    return verdicts == 0 and any(r.unverified for r in rows)


def summarize(rows: Sequence[EpisodeRow], group: dict[str, str | int]) -> GroupSummary:
    rounds = [r.rounds_used for r in rows]
    costs = [r.cost_usd for r in rows]
    return GroupSummary(
        group=group,
        episodes=len(rows),
        rates={f: rate(getattr(r, f) for r in rows) for f in RATE_FIELDS},
        unverified=sum(1 for r in rows if r.unverified),
        gpu_not_run=gpu_not_run(rows),
        mean_rounds=(sum(rounds) / len(rounds)) if rounds else None,
        mean_rounds_to_success=_mean([r.solved_round for r in rows if r.solved_round is not None]),
        mean_rounds_to_static=_mean([r.first_static_round for r in rows if r.first_static_round is not None]),
        geomean_speedup=geomean_speedup([r.speedup for r in rows if r.success and r.speedup is not None]),
        fast_p={
            f"fast_{p:g}": fast_p([r.success for r in rows], [r.speedup for r in rows], p) for p in FAST_P
        },
        mean_input_tokens=(sum(r.input_tokens for r in rows) / len(rows)) if rows else None,
        mean_output_tokens=(sum(r.output_tokens for r in rows) / len(rows)) if rows else None,
        cost_usd=None
        if (not rows or any(c is None for c in costs))
        else sum(c for c in costs if c is not None),
    )


def aggregate(rows: Sequence[EpisodeRow], by: Sequence[str]) -> list[GroupSummary]:
    """One summary per distinct value of the ``by`` fields (e.g. ``("condition", "model")``)."""
    groups: dict[tuple[str | int, ...], list[EpisodeRow]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, f) for f in by), []).append(r)
    return [
        summarize(g, dict(zip(by, k, strict=True)))
        for k, g in sorted(groups.items(), key=lambda kv: str(kv[0]))
    ]


def compare_conditions(rows: Sequence[EpisodeRow], field: str = "success") -> list[PairedComparison]:
    """Every pair of conditions, per model, on the (task, sample) pairs both have finished."""
    out = []
    for model in sorted({r.model for r in rows}):
        mine = [r for r in rows if r.model == model]
        by_cond: dict[str, dict[tuple[str, int], bool]] = {}
        for r in mine:
            by_cond.setdefault(r.condition, {})[(r.task_id, r.sample)] = bool(getattr(r, field))
        for ca, cb in combinations(sorted(by_cond), 2):
            keys = sorted(set(by_cond[ca]) & set(by_cond[cb]))
            a = [by_cond[ca][k] for k in keys]
            b = [by_cond[cb][k] for k in keys]
            both, only_a, only_b, neither, diff, ci = paired(a, b)
            out.append(
                PairedComparison(
                    group={"model": model},
                    condition_a=ca,
                    condition_b=cb,
                    pairs=len(keys),
                    both=both,
                    only_a=only_a,
                    only_b=only_b,
                    neither=neither,
                    diff=diff,
                    ci_low=ci[0] if ci else None,
                    ci_high=ci[1] if ci else None,
                    p_value=mcnemar_exact(only_a, only_b) if keys else None,
                )
            )
    return out


def success_curves(
    rows: Sequence[EpisodeRow], by: str = "condition", field: str = "solved_round"
) -> dict[str, list[Rate]]:
    """success@k for k = 1..max rounds, per value of ``by``; ``field`` may be ``first_static_round`` for the
    CPU-checkable curve (compiled with every target instruction in the SASS)."""
    max_rounds = max((r.max_rounds for r in rows), default=0)
    groups: dict[str, list[int | None]] = {}
    for r in rows:
        groups.setdefault(str(getattr(r, by)), []).append(getattr(r, field))
    return {k: success_at_round(v, max_rounds) for k, v in sorted(groups.items())}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: n episodes, c of them successful (Chen et al., 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


class PassAtK(_Frozen):
    """pass@k of one group, averaged over its tasks."""

    group: dict[str, str | int]
    field: str = Field(description="the episode property counted: success, or static_ok (in SASS)")
    tasks: int
    samples_min: int = Field(description="fewest episodes of any task; k goes up to it")
    values: dict[int, float | None] = Field(description="k -> mean pass@k over tasks; None when unknown")
    gpu_not_run: bool = False


def pass_at_k_table(
    rows: Sequence[EpisodeRow], by: Sequence[str] = ("condition", "model"), field: str = "success"
) -> list[PassAtK]:
    """pass@k for k = 1..(fewest samples of a task) per group, each task's n episodes being its samples."""
    groups: dict[tuple[str | int, ...], dict[str, list[EpisodeRow]]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, f) for f in by), {}).setdefault(r.task_id, []).append(r)
    out = []
    for key, tasks in sorted(groups.items(), key=lambda kv: str(kv[0])):
        n_min = min(len(v) for v in tasks.values())
        unknown = field in GPU_FIELDS and gpu_not_run([r for v in tasks.values() for r in v])
        values: dict[int, float | None] = {}
        for k in range(1, n_min + 1):
            per_task = [pass_at_k(len(v), sum(1 for r in v if getattr(r, field)), k) for v in tasks.values()]
            values[k] = None if unknown else sum(per_task) / len(per_task)
        out.append(
            PassAtK(
                group=dict(zip(by, key, strict=True)),
                field=field,
                tasks=len(tasks),
                samples_min=n_min,
                values=values,
                gpu_not_run=unknown,
            )  # fmt: skip
        )
    return out


class CostEfficiency(_Frozen):
    """Tokens and dollars spent per solved episode (and per episode that reached the SASS check)."""

    group: dict[str, str | int]
    episodes: int
    solved: int
    in_sass: int
    tokens: int = Field(description="input + output tokens of every episode of the group")
    cost_usd: float | None = Field(description="None when some episode's model has no price")
    tokens_per_solved: float | None
    cost_per_solved_usd: float | None
    tokens_per_in_sass: float | None
    gpu_not_run: bool = False


def cost_efficiency(
    rows: Sequence[EpisodeRow], by: Sequence[str] = ("condition", "model")
) -> list[CostEfficiency]:
    groups: dict[tuple[str | int, ...], list[EpisodeRow]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, f) for f in by), []).append(r)
    out = []
    for key, g in sorted(groups.items(), key=lambda kv: str(kv[0])):
        tokens = sum(r.input_tokens + r.output_tokens for r in g)
        costs = [r.cost_usd for r in g]
        cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        solved = sum(1 for r in g if r.success)
        in_sass = sum(1 for r in g if r.static_ok)
        unknown = gpu_not_run(g)
        out.append(
            CostEfficiency(
                group=dict(zip(by, key, strict=True)),
                episodes=len(g),
                solved=solved,
                in_sass=in_sass,
                tokens=tokens,
                cost_usd=cost,
                tokens_per_solved=tokens / solved if solved else None,
                cost_per_solved_usd=(cost / solved) if (solved and cost is not None) else None,
                tokens_per_in_sass=tokens / in_sass if in_sass else None,
                gpu_not_run=unknown,
            )  # fmt: skip
        )
    return out
