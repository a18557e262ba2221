"""The report's figures (matplotlib, Agg backend), each returned as PNG bytes.

Every figure says so when it has nothing to show (for example no timed successes on a machine without a
GPU) instead of drawing an empty axis that reads like a result.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .metrics import GroupSummary, Rate  # noqa: E402

DPI = 110
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _empty(title: str, why: str) -> bytes:
    fig, ax = plt.subplots(figsize=(6.4, 2.2))
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, fontsize=10, color="#555555")
    return _png(fig)


def _err(r: Rate) -> tuple[float, float]:
    if r.rate is None or r.ci_low is None or r.ci_high is None:
        return (0.0, 0.0)
    return (max(0.0, r.rate - r.ci_low), max(0.0, r.ci_high - r.rate))


def ablation_chart(summaries: Sequence[GroupSummary]) -> bytes:
    """Success rate by condition (one bar per model), with 95% intervals; a lighter bar behind each shows
    the rate of compiled candidates with every target instruction in the SASS (checkable without a GPU)."""
    title = "Success by condition (95% Wilson intervals)"
    if not summaries:
        return _empty(title, "no finished episodes")
    conditions = list(dict.fromkeys(str(s.group["condition"]) for s in summaries))
    models = list(dict.fromkeys(str(s.group["model"]) for s in summaries))
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(6.4, 1.3 * len(conditions) * max(1, len(models)) + 2), 4.2))
    for j, model in enumerate(models):
        xs: list[float] = []
        succ: list[float] = []
        stat: list[float] = []
        errs: tuple[list[float], list[float]] = ([], [])
        for i, cond in enumerate(conditions):
            s = next(
                (x for x in summaries if x.group["condition"] == cond and x.group["model"] == model), None
            )
            if s is None:
                continue
            xs.append(i + (j - (len(models) - 1) / 2) * width)
            succ.append(s.rates["success"].rate or 0.0)
            stat.append(s.rates["static_ok"].rate or 0.0)
            lo, hi = _err(s.rates["success"])
            errs[0].append(lo)
            errs[1].append(hi)
        color = COLORS[j % len(COLORS)]
        ax.bar(xs, stat, width * 0.92, color=color, alpha=0.25, label=f"{model}: instructions in SASS")
        ax.bar(xs, succ, width * 0.6, color=color, yerr=errs, capsize=3, label=f"{model}: success")
    ax.set_xticks(range(len(conditions)), conditions, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of episodes")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def round_curves_chart(success: dict[str, list[Rate]], static: dict[str, list[Rate]]) -> bytes:
    """success@k per condition (solid, with intervals) and instructions-in-SASS@k (dashed)."""
    title = "Solved within k rounds"
    if not success:
        return _empty(title, "no finished episodes")
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    for i, (cond, rates) in enumerate(success.items()):
        color = COLORS[i % len(COLORS)]
        ks = list(range(1, len(rates) + 1))
        ys = [r.rate or 0.0 for r in rates]
        ax.plot(ks, ys, "-o", color=color, label=f"{cond}: success")
        ax.fill_between(
            ks, [r.ci_low or 0.0 for r in rates], [r.ci_high or 0.0 for r in rates], color=color, alpha=0.12
        )
        st = static.get(cond)
        if st:
            ax.plot(ks, [r.rate or 0.0 for r in st], "--", color=color, alpha=0.7, label=f"{cond}: in SASS")
    ax.set_xticks(range(1, max(len(r) for r in success.values()) + 1))
    ax.set_xlabel("round k")
    ax.set_ylabel("fraction of episodes")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def speedup_chart(speedups: dict[str, list[float]]) -> bytes:
    """Speedup over the library baseline of each successful episode, per condition (log scale)."""
    title = "Speedup of successful kernels over the library baseline"
    data = {k: [v for v in vs if v > 0 and math.isfinite(v)] for k, vs in speedups.items()}
    data = {k: v for k, v in data.items() if v}
    if not data:
        return _empty(title, "no successful episode was timed (timing needs a GPU; see the notes above)")
    fig, ax = plt.subplots(figsize=(max(6.4, 1.4 * len(data) + 2), 4.2))
    labels = list(data)
    ax.boxplot([data[k] for k in labels], showfliers=False)
    for i, k in enumerate(labels, start=1):
        xs = [i + 0.08 * ((j % 5) - 2) for j in range(len(data[k]))]
        ax.scatter(xs, data[k], s=14, color=COLORS[(i - 1) % len(COLORS)], alpha=0.8, zorder=3)
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=15)
    ax.set_yscale("log")
    ax.axhline(1.0, color="#444444", lw=1, ls=":")
    ax.set_ylabel("baseline time / kernel time")
    ax.set_title(title)
    return _png(fig)


def failures_chart(top: dict[str, list[tuple[str, int]]], limit_families: int = 8) -> bytes:
    """The most common failure reasons per instruction family (one panel per family)."""
    title = "Most common failure reasons per instruction family"
    fams = list(top)[:limit_families]
    if not fams:
        return _empty(title, "no failed attempts")
    heights = [max(1, len(top[f])) for f in fams]
    fig, axes = plt.subplots(
        len(fams), 1, figsize=(9.5, 0.55 * sum(heights) + 0.9 * len(fams)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, fam in zip(axes[:, 0], fams, strict=True):
        items = top[fam]
        labels = [_wrap(r, 70) for r, _ in items][::-1]
        ax.barh(range(len(items)), [n for _, n in items][::-1], color="#d62728", alpha=0.75)
        ax.set_yticks(range(len(items)), labels, fontsize=7)
        ax.set_title(fam, fontsize=9, loc="left")
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(title)
    fig.tight_layout()
    return _png(fig)


def _wrap(text: str, width: int) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    return "\n".join(lines[:2]) + ("…" if len(lines) > 2 else "")
