"""``write_report``: the study's tables and figures from a bench folder, as Markdown and one HTML page.

Only finished episodes enter the metrics; interrupted, failed and pending ones are counted and named so a
reader knows the study is incomplete. Episodes whose GPU stages never ran are flagged: their correctness,
execution and speed are unknown, which is not the same as failed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ptxrag.agent_graph import TokenUsage

from . import metrics, plots
from .failures import top_failures
from .metrics import Estimate, GroupSummary, Rate
from .prices import PriceTable
from .records import EpisodeRow
from .render import Document, Figure, Paragraph, Section, Table, write
from .store import BenchStore
from .study import model_label


class ReportFiles(BaseModel):
    model_config = ConfigDict(frozen=True)
    markdown: str
    html: str
    figures: list[str]
    episodes: int
    finished: int


def pct(r: Rate, ci: bool = True) -> str:
    if r.rate is None:
        return "–"
    s = f"{100 * r.rate:.0f}% ({r.hits}/{r.n})"
    if ci and r.ci_low is not None and r.ci_high is not None:
        s += f" [{100 * r.ci_low:.0f}–{100 * r.ci_high:.0f}%]"
    return s


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _est(e: Estimate) -> str:
    if e.value is None:
        return "–"
    return f"{e.value:.2f}× (n={e.n}) [{e.ci_low:.2f}–{e.ci_high:.2f}]"


def _reprice(rows: list[EpisodeRow], prices: PriceTable) -> list[EpisodeRow]:
    out = []
    for r in rows:
        usage = TokenUsage(
            input_tokens=r.input_tokens, output_tokens=r.output_tokens,
            cache_read_tokens=r.cache_read_tokens, cache_creation_tokens=r.cache_creation_tokens,
        )  # fmt: skip
        out.append(r.model_copy(update={"cost_usd": prices.cost_usd(r.model, usage)}))
    return out


def short_models(rows: list[EpisodeRow]) -> list[EpisodeRow]:
    """Short model names for tables (``replay:/long/path`` -> ``replay:dir``), unless two would clash."""
    labels = {m: model_label(m) for m in {r.model for r in rows}}
    if len(set(labels.values())) < len(labels):
        return rows
    return [r.model_copy(update={"model": labels[r.model]}) for r in rows]


def _main_table(summaries: Sequence[GroupSummary], keys: Sequence[str]) -> Table:
    headers = [
        *keys, "episodes", "compiled", "in SASS", "correct", "executed", "success [95% CI]", "GPU not run",
        "mean rounds", "geomean speedup", "fast_0", "fast_1", "fast_2", "tokens in / out (mean)", "cost (USD)",
    ]  # fmt: skip
    rows = []
    for s in summaries:
        rows.append(
            [
                *(str(s.group[k]) for k in keys),
                str(s.episodes),
                pct(s.rates["compiled"], False),
                pct(s.rates["static_ok"], False),
                pct(s.rates["correct"], False),
                pct(s.rates["executed"], False),
                pct(s.rates["success"]),
                str(s.unverified),
                _num(s.mean_rounds, "{:.1f}"),
                _est(s.geomean_speedup),
                *(_num(s.fast_p[f"fast_{p:g}"], "{:.2f}") for p in metrics.FAST_P),
                f"{_num(s.mean_input_tokens, '{:.0f}')} / {_num(s.mean_output_tokens, '{:.0f}')}",
                _num(s.cost_usd, "{:.2f}"),
            ]
        )
    return Table(headers, rows)


def _study_section(out: Path, all_rows: list[EpisodeRow], done: list[EpisodeRow]) -> Section:
    sec = Section("Study")
    status = {
        s: sum(1 for r in all_rows if r.status == s)
        for s in ("done", "interrupted", "error", "running", "pending")
    }
    uniq = lambda f: ", ".join(sorted({str(getattr(r, f)) for r in all_rows})) or "–"  # noqa: E731
    sec.blocks.append(
        Table(
            ["", ""],
            [
                ["bench folder", f"`{out}`"],
                ["generated", dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")],
                ["tasks", uniq("task_id")],
                ["models", uniq("model")],
                ["conditions", uniq("condition")],
                ["samples per cell", str(len({r.sample for r in all_rows}))],
                ["round limit", uniq("max_rounds")],
                ["episodes", ", ".join(f"{n} {s}" for s, n in status.items() if n) or "none"],
            ],
        )
    )
    unfinished = len(all_rows) - len(done)
    if unfinished:
        sec.blocks.append(
            Paragraph(
                f"{unfinished} episode(s) have not finished (interrupted, failed or never started) and are left "
                "out of every metric below; re-run the same `ptxrag bench` command to resume them.",
                "warning",
            )
        )
    unverified = sum(1 for r in done if r.unverified)
    if unverified:
        sec.blocks.append(
            Paragraph(
                f"{unverified} of {len(done)} finished episode(s) never ran the GPU stages (no suitable GPU where "
                "they ran): their correctness, instruction execution and speed are unknown, not failed. Their "
                "success, correct, executed and fast_p count them as not successful; 'in SASS' (compiled, and every "
                "target instruction present in the binary) is as far as they could be checked.",
                "warning",
            )
        )
    sec.blocks.append(
        Paragraph(
            "Success means compiled, correct on every check, and every target instruction's Nsight Compute "
            "predicated-on thread count above zero. Rate intervals are 95% Wilson score intervals; speedup "
            f"and paired-difference intervals are 95% percentile bootstrap intervals ({metrics.N_BOOT} "
            "resamples). fast_p is KernelBench's: the fraction of all episodes that "
            "succeeded with speedup over the library baseline greater than p. Geometric-mean speedup is over "
            "successful, timed episodes.",
            "note",
        )
    )
    return sec


def build_report(
    out: Path, *, prices: PriceTable | None = None, on_step: Callable[[str], None] | None = None
) -> Document:
    step = on_step or (lambda _s: None)
    with BenchStore(out, create=False) as store:
        step("reading the bench database")
        all_rows = store.episodes()
        rounds = store.rounds(light=True)
    if prices is not None:
        all_rows = _reprice(all_rows, prices)
    all_rows = short_models(all_rows)
    done = [r for r in all_rows if r.status == "done"]
    doc = Document(f"ptxrag study report: {out.name}")
    doc.sections.append(_study_section(out, all_rows, done))

    step("success by condition")
    by_cm = metrics.aggregate(done, ("condition", "model"))
    sec = Section("Success by condition", [Figure("ablation", plots.ablation_chart(by_cm), "Success (dark) and "
                  "instructions in SASS (light) by condition and model, with 95% intervals on success")])  # fmt: skip
    sec.blocks.append(_main_table(by_cm, ("condition", "model")))
    doc.sections.append(sec)

    step("task families and levels")
    sec = Section("By task family and level")
    sec.blocks.append(_main_table(metrics.aggregate(done, ("family", "condition")), ("family", "condition")))
    sec.blocks.append(_main_table(metrics.aggregate(done, ("level", "condition")), ("level", "condition")))
    sec.blocks.append(_main_table(metrics.aggregate(done, ("model",)), ("model",)))
    doc.sections.append(sec)

    step("success@round curves")
    curves = metrics.success_curves(done, "condition", "solved_round")
    static_curves = metrics.success_curves(done, "condition", "first_static_round")
    sec = Section("Solved within k rounds", [Figure("success_at_round", plots.round_curves_chart(curves, static_curves),
                  "success@k per condition (solid, 95% band) and instructions-in-SASS@k (dashed)")])  # fmt: skip
    k_max = max((len(v) for v in curves.values()), default=0)
    sec.blocks.append(
        Table(
            ["condition", "measure", *(f"k={k}" for k in range(1, k_max + 1))],
            [[c, "success", *(pct(r, False) for r in curves[c])] for c in curves]
            + [[c, "in SASS", *(pct(r, False) for r in static_curves[c])] for c in static_curves],
        )
    )
    doc.sections.append(sec)

    step("paired comparisons")
    sec = Section("Paired comparisons between conditions")
    sec.blocks.append(Paragraph(
        "Episodes matched on task, model and sample. diff = success rate of A minus B over the pairs; p = exact "
        "two-sided McNemar test on the pairs where exactly one condition succeeded.", "note"))  # fmt: skip
    rows = []
    for field, label in (("success", "success"), ("static_ok", "in SASS")):
        for c in metrics.compare_conditions(done, field):
            ci = f" [{c.ci_low:+.2f}, {c.ci_high:+.2f}]" if c.ci_low is not None else ""
            rows.append([
                str(c.group["model"]), label, c.condition_a, c.condition_b, str(c.pairs), str(c.both),
                str(c.only_a), str(c.only_b), str(c.neither), f"{_num(c.diff, '{:+.2f}')}{ci}", _num(c.p_value, "{:.3f}"),
            ])  # fmt: skip
    sec.blocks.append(
        Table(["model", "measure", "A", "B", "pairs", "both", "only A", "only B", "neither", "diff [95% CI]", "p"], rows)
        if rows else Paragraph("fewer than two conditions: nothing to compare")
    )  # fmt: skip
    doc.sections.append(sec)

    step("speedups")
    speeds: dict[str, list[float]] = {}
    for r in done:
        if r.success and r.speedup is not None:
            speeds.setdefault(r.condition, []).append(r.speedup)
    doc.sections.append(Section("Speedup distribution", [Figure("speedups", plots.speedup_chart(speeds),
                        "speedup of each successful episode over the library baseline, by condition")]))  # fmt: skip

    step("failure reasons")
    family = {r.episode_id: r.family for r in done}
    top = top_failures((family[x.episode_id], x.failure_reason) for x in rounds if x.episode_id in family)
    sec = Section("Failure reasons per instruction family", [Figure("failures", plots.failures_chart(top),
                  "the most common reasons attempts failed, per task family (every failed round counts)")])  # fmt: skip
    sec.blocks.append(
        Table(["family", "reason", "rounds"], [[f, r, str(n)] for f, items in top.items() for r, n in items])
    )
    doc.sections.append(sec)

    step("episode list")
    last = {}
    for x in rounds:
        last[x.episode_id] = x.outcome
    doc.sections.append(Section("Episodes", [Table(
        ["episode", "task", "model", "condition", "sample", "status", "stop", "rounds", "last outcome", "speedup", "transcript"],
        [[r.episode_id, r.task_id, r.model, r.condition, str(r.sample), r.status, r.stop_reason or "–",
          str(r.rounds_used), (last.get(r.episode_id) or r.error or "–")[:140], _num(r.speedup),
          f"`{r.transcript_md}`" if r.transcript_md else "–"] for r in all_rows],
    )]))  # fmt: skip
    return doc


def write_report(
    out: Path | str,
    *,
    dest: Path | str | None = None,
    prices: PriceTable | None = None,
    on_step: Callable[[str], None] | None = None,
) -> ReportFiles:
    """Write ``report.md`` (+ ``figures/*.png``) and the self-contained ``report.html`` into ``dest``
    (default: the bench folder itself)."""
    out = Path(out).expanduser().resolve()
    doc = build_report(out, prices=prices, on_step=on_step)
    target = Path(dest).expanduser().resolve() if dest is not None else out
    target.mkdir(parents=True, exist_ok=True)
    if on_step:
        on_step("writing files")
    md, page = write(doc, target)
    with BenchStore(out, create=False) as store:
        rows = store.episodes()
    return ReportFiles(
        markdown=str(md),
        html=str(page),
        figures=sorted(str(p) for p in (target / "figures").glob("*.png")),
        episodes=len(rows),
        finished=sum(1 for r in rows if r.status == "done"),
    )
