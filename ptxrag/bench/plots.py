"""The report's figures (matplotlib, Agg backend), each returned as PNG bytes.

Every figure says so when it has nothing to show (for example no timed successes on a machine without a
GPU) instead of drawing an empty axis that reads like a result.

Text is most of what a figure costs to draw, and matplotlib lays out every text again in each layout pass
(``constrained_layout``, ``bbox_inches="tight"``): labels inside the axes (heatmap cells, notes on bars) are
kept out of the layout (``in_layout=False``), as they never change the axes' bounds.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .metrics import GroupSummary, Rate  # noqa: E402

DPI = 110
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _fit(fig: Figure) -> None:
    """``tight_layout`` once, now; it leaves a placeholder layout engine behind, which would make savefig
    draw the figure a second time, so the figure goes back to having none."""
    fig.tight_layout()
    fig.set_layout_engine(None)


def _png(fig: Figure, *, fitted: bool = False) -> bytes:
    """The figure as PNG. ``fitted``: its layout already keeps every artist on the canvas (``tight_layout``
    measured at the saving ``DPI``, or constrained layout), so nothing is cropped; a figure fitted by
    ``tight_layout`` is then drawn once. Otherwise ``bbox_inches="tight"`` crops it to what was drawn, which
    costs a second draw (legends placed beside the axes need it)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=None if fitted else "tight")
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
    none_ran = all(s.gpu_not_run for s in summaries)  # then said once, not under every bar
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
            lo, hi = _err(s.rates["success"]) if not s.gpu_not_run else (0.0, 0.0)
            errs[0].append(lo)
            errs[1].append(hi)
            if s.gpu_not_run and not none_ran:
                ax.text(
                    xs[-1],
                    0.02,
                    "success n/a\n(GPU not run)",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    in_layout=False,
                )
        color = COLORS[j % len(COLORS)]
        ax.bar(xs, stat, width * 0.92, color=color, alpha=0.25, label=f"{model}: instructions in SASS")
        ax.bar(xs, succ, width * 0.6, color=color, yerr=errs, capsize=3, label=f"{model}: success")
    ax.set_xticks(range(len(conditions)), conditions, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of episodes")
    ax.set_title(title)
    if none_ran:
        ax.text(0.5, 0.02, "success n/a for every bar: the GPU stages did not run", transform=ax.transAxes,
                ha="center", va="bottom", fontsize=9, in_layout=False)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def round_curves_chart(
    success: dict[str, list[Rate]], static: dict[str, list[Rate]], unknown: frozenset[str] = frozenset()
) -> bytes:
    """success@k per condition (solid, with intervals) and instructions-in-SASS@k (dashed); conditions in
    ``unknown`` (GPU stages never ran) get no success curve, only a legend entry saying so."""
    title = "Solved within k rounds"
    if not success:
        return _empty(title, "no finished episodes")
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    for i, (cond, rates) in enumerate(success.items()):
        color = COLORS[i % len(COLORS)]
        ks = list(range(1, len(rates) + 1))
        ys = [r.rate or 0.0 for r in rates]
        if cond in unknown:
            ax.plot([], [], "-o", color=color, label=f"{cond}: success n/a (GPU not run)")
        else:
            ax.plot(ks, ys, "-o", color=color, label=f"{cond}: success")
            ax.fill_between(
                ks,
                [r.ci_low or 0.0 for r in rates],
                [r.ci_high or 0.0 for r in rates],
                color=color,
                alpha=0.12,
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
        gridspec_kw={"height_ratios": heights}, dpi=DPI,
    )  # fmt: skip
    for ax, fam in zip(axes[:, 0], fams, strict=True):
        items = top[fam]
        labels = [_wrap(r, 70) for r, _ in items][::-1]
        ax.barh(range(len(items)), [n for _, n in items][::-1], color="#d62728", alpha=0.75)
        ax.set_yticks(range(len(items)), labels, fontsize=7)
        ax.set_title(fam, fontsize=9, loc="left")
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(title)
    _fit(fig)
    return _png(fig, fitted=True)


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


def task_heatmap(
    tasks: Sequence[str],
    columns: Sequence[str],
    panels: Sequence[tuple[str, dict[tuple[str, str], tuple[float | None, str]], str]],
) -> bytes:
    """One panel per measure: tasks (rows) x columns (condition, or condition · model), each cell coloured by
    its value and labelled with its text. ``panels``: (title, {(task, column): (value or None, label)},
    colour map); a cell without a value (not measured, or n/a) is grey with its label."""
    title = "Per task and condition"
    if not tasks or not columns:
        return _empty(title, "no finished episodes")
    # panels side by side while they stay readable; many columns (conditions on study axes): one per row
    ncols = 2 if len(panels) > 1 and len(columns) <= 6 else 1
    nrows = math.ceil(len(panels) / ncols)
    w = max(3.2, 1.15 * len(columns) + 2.4)
    h = 0.5 * len(tasks) + 0.8
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(w * ncols, h * nrows + 1.2), squeeze=False, constrained_layout=True
    )
    for ax in axes.flat[len(panels) :]:
        ax.set_axis_off()
    for n, (ax, (ptitle, cells, cmap_name)) in enumerate(zip(axes.flat, panels, strict=False)):
        cmap = matplotlib.colormaps[cmap_name].with_extremes(bad="#e6e6e6")
        vals = [[cells.get((t, c), (None, ""))[0] for c in columns] for t in tasks]
        finite = [v for row in vals for v in row if v is not None]
        # rates span 0..1; rounds span 1..the largest seen (fewer rounds is better: the reversed map)
        lo, hi = (0.0, 1.0) if ptitle != "rounds to success" else (1.0, max([2.0, *finite]))
        grid = [[math.nan if v is None else v for v in row] for row in vals]
        ax.imshow(grid, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        for i, t in enumerate(tasks):
            for j, c in enumerate(columns):
                v, label = cells.get((t, c), (None, "–"))
                frac = 0.0 if v is None else (v - lo) / (hi - lo)
                dark = v is not None and (1 - frac if cmap_name.endswith("_r") else frac) > 0.6
                ax.text(
                    j,
                    i,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "#222222",
                    in_layout=False,
                )
        # the panels of a column share their columns: only the lowest names them (the labels are most of
        # what the figure costs to draw, and repeated they say nothing new)
        lowest = n + ncols >= len(panels)
        ax.set_xticks(range(len(columns)), columns if lowest else [], rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
        ax.set_title(ptitle, fontsize=10)
    fig.suptitle(title + " (grey: not measured; n/a: GPU stages not run)", fontsize=11)
    return _png(fig, fitted=True)


def pass_at_k_chart(curves: dict[str, dict[int, float | None]], title: str) -> bytes:
    """pass@k against k per group (unbiased estimator over samples)."""
    data = {g: {k: v for k, v in c.items() if v is not None} for g, c in curves.items()}
    data = {g: c for g, c in data.items() if c}
    if not data:
        return _empty(title, "no known values (the GPU stages did not run, or no samples)")
    fig, ax = plt.subplots(figsize=(6.8, 3.8))
    for i, (g, c) in enumerate(data.items()):
        ks = sorted(c)
        ax.plot(ks, [c[k] for k in ks], "-o", color=COLORS[i % len(COLORS)], label=g)
    ax.set_xticks(sorted({k for c in data.values() for k in c}))
    ax.set_xlabel("k (samples drawn per task)")
    ax.set_ylabel("pass@k (mean over tasks)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def _missing_notes(
    ax: Axes, xs: Sequence[float], values: Sequence[float | None], notes: Sequence[str], y: float, what: str
) -> None:
    """Say at each bar without a value why it has none; when no bar has one for the same reason, say it once
    for the panel (a column of identical rotated notes reads no better and costs a text each to draw)."""
    missing = {note for v, note in zip(values, notes, strict=True) if v is None}
    if len(missing) == 1 and all(v is None for v in values):
        ax.text(0.01, 0.95, f"{what}: {missing.pop()}", transform=ax.transAxes, ha="left", va="center",
                fontsize=9, color="#555555", in_layout=False)  # fmt: skip
        return
    for x, v, note in zip(xs, values, notes, strict=True):
        if v is None:
            ax.text(
                x,
                y,
                note,
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7,
                color="#555555",
                in_layout=False,
            )


def cost_chart(rows: Sequence[tuple[str, float | None, float | None, float | None, str]]) -> bytes:
    """Tokens per solved episode and per episode with the instructions in the SASS, and dollars per solved
    episode, one bar group per (condition, budget, model). ``rows``: (label, tokens/solved, tokens/in-SASS,
    cost/solved, note for a missing solved value)."""
    title = "Cost efficiency"
    if not rows:
        return _empty(title, "no finished episodes")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8.0, 1.6 * len(rows) + 4), 4.0), dpi=DPI)
    xs = list(range(len(rows)))
    labels = [r[0] for r in rows]
    solved = [r[1] for r in rows]
    sass = [r[2] for r in rows]
    a1.bar(
        [x - 0.2 for x in xs], [v or 0.0 for v in solved], 0.4, color=COLORS[0], label="per solved episode"
    )
    a1.bar([x + 0.2 for x in xs], [v or 0.0 for v in sass], 0.4, color=COLORS[0], alpha=0.35,
           label="per episode with instructions in SASS")  # fmt: skip
    top = max([v for v in solved + sass if v is not None], default=1.0)
    notes = [r[4] for r in rows]
    _missing_notes(a1, [x - 0.2 for x in xs], solved, notes, top * 0.02, "per solved episode")
    a1.set_ylim(0, top * 1.15)
    a1.set_xticks(xs, labels, rotation=20, ha="right", fontsize=8)
    a1.set_ylabel("tokens (input + output)")
    a1.set_title("tokens per episode that got there", fontsize=10)
    a1.legend(fontsize=7)
    costs = [r[3] for r in rows]
    a2.bar(xs, [v or 0.0 for v in costs], 0.5, color=COLORS[2])
    ctop = max([v for v in costs if v is not None], default=0.0) or 1.0
    _missing_notes(a2, xs, costs, notes, ctop * 0.02, "cost per solved episode")
    a2.set_ylim(0, ctop * 1.15)
    a2.set_xticks(xs, labels, rotation=20, ha="right", fontsize=8)
    a2.set_ylabel("USD")
    a2.set_title("cost per solved episode", fontsize=10)
    fig.suptitle(title)
    _fit(fig)
    return _png(fig, fitted=True)
