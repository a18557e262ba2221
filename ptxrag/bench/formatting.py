"""How the report writes numbers: rates with their intervals, estimates, and "n/a" where unknown."""

from __future__ import annotations

from . import metrics
from .metrics import Estimate, GroupSummary, Rate

NA_GPU = "n/a (GPU not run)"


def pct(r: Rate, ci: bool = True, na: bool = False) -> str:
    """``50% (1/2) [9–91%]``; ``na``: the rate is unknown because the GPU stages never ran."""
    if na:
        return NA_GPU
    if r.rate is None:
        return "–"
    s = f"{100 * r.rate:.0f}% ({r.hits}/{r.n})"
    if ci and r.ci_low is not None and r.ci_high is not None:
        s += f" [{100 * r.ci_low:.0f}–{100 * r.ci_high:.0f}%]"
    return s


def num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def est(e: Estimate) -> str:
    if e.value is None:
        return "–"
    return f"{e.value:.2f}× (n={e.n}) [{e.ci_low:.2f}–{e.ci_high:.2f}]"


def stage(s: GroupSummary, field: str, ci: bool = True) -> str:
    """A funnel stage's rate with its Wilson interval, or n/a when only the GPU could decide it and it never ran."""
    return pct(s.rates[field], ci, na=s.gpu_not_run and field in metrics.GPU_FIELDS)
