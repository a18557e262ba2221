"""``write_report``: the study's tables and figures from a bench folder, as Markdown and one HTML page.

Only finished episodes enter the metrics; interrupted, failed and pending ones are counted and named so a
reader knows the study is incomplete. Episodes whose GPU stages never ran are flagged: their correctness,
execution and speed are unknown, which is not the same as failed.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from . import metrics, sections
from .failures import top_failures
from .formatting import NA_GPU, est, num, pct, stage
from .metrics import GroupSummary
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


def _reprice(rows: list[EpisodeRow], prices: PriceTable) -> list[EpisodeRow]:
    return [r.model_copy(update={"cost_usd": prices.cost_usd(r.model, r)}) for r in rows]


def short_models(rows: list[EpisodeRow]) -> list[EpisodeRow]:
    """Short model names for tables (``replay:/long/path`` -> ``replay:dir``), unless two would clash."""
    labels = {m: model_label(m) for m in {r.model for r in rows}}
    if len(set(labels.values())) < len(labels):
        return rows
    return [r.model_copy(update={"model": labels[r.model]}) for r in rows]


def _main_table(summaries: Sequence[GroupSummary], keys: Sequence[str]) -> Table:
    headers = [
        *keys, "episodes", "compiled [95% CI]", "in SASS [95% CI]", "correct [95% CI]", "executed [95% CI]",
        "success [95% CI]", "GPU not run", "mean rounds", "geomean speedup", "fast_0", "fast_1", "fast_2",
        "tokens in / out (mean)", "cost (USD)",
    ]  # fmt: skip
    rows = []
    for s in summaries:
        rows.append(
            [
                *(str(s.group[k]) for k in keys),
                str(s.episodes),
                *(stage(s, f) for f in metrics.RATE_FIELDS),
                str(s.unverified),
                num(s.mean_rounds, "{:.1f}"),
                est(s.geomean_speedup),
                *(
                    NA_GPU if s.gpu_not_run else num(s.fast_p[f"fast_{p:g}"], "{:.2f}")
                    for p in metrics.FAST_P
                ),
                f"{num(s.mean_input_tokens, '{:.0f}')} / {num(s.mean_output_tokens, '{:.0f}')}",
                num(s.cost_usd, "{:.2f}"),
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
                *_axis_rows(out),
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
    errored = status["error"]
    if errored and done:
        # an episode the harness ended is out of the rates: say what success would be were each of them a
        # failure, so a run whose failures turn into harness errors cannot look better than it is
        wins = sum(1 for r in done if r.success)
        n = len(done) + errored
        lo_hi = metrics.wilson_ci(wins, n)
        band = f" [{lo_hi[0]:.0%}-{lo_hi[1]:.0%}]" if lo_hi else ""
        sec.blocks.append(
            Paragraph(
                f"{errored} episode(s) ended in a harness error. Counted as failures, success over all "
                f"{n} would be {wins / n:.0%} ({wins}/{n}){band}, against {wins / len(done):.0%} "
                f"({wins}/{len(done)}) over the finished ones.",
                "warning",
            )
        )
    unverified = sum(1 for r in done if r.unverified)
    if unverified:
        sec.blocks.append(
            Paragraph(
                f"{unverified} of {len(done)} finished episode(s) never ran the GPU stages (no suitable GPU where "
                "they ran): their correctness, instruction execution and speed are unknown, not failed. Where no "
                f"episode of a group had its GPU stages run, correct, executed, success and fast_p read '{NA_GPU}'; "
                "in a group with some GPU verdicts they count as not successful. 'in SASS' (compiled, and every "
                "target instruction present in the binary) is as far as they could be checked.",
                "warning",
            )
        )
    sec.blocks.append(
        Paragraph(
            "Success means compiled, correct on every check, and every target instruction's Nsight Compute "
            "predicated-on thread count above zero. Rate intervals are 95% Wilson score intervals, paired "
            "differences of rates get Newcombe's paired score interval, and speedup intervals are 95% "
            f"percentile bootstrap intervals ({metrics.N_BOOT} resamples). fast_p is KernelBench's: the fraction of all episodes that "
            "succeeded with speedup over the library baseline greater than p. Geometric-mean speedup is over "
            "successful, timed episodes.",
            "note",
        )
    )
    return sec


def _axis_rows(out: Path) -> list[list[str]]:
    """The study's context budget and history mode: one for every episode, the conditions' own, or an
    axis (then each value is its own condition: ``templates@8k``, ``templates/full``)."""
    with BenchStore(out, create=False) as store:
        meta = store.meta()
    rows = []
    for key, label in (("budget_tokens", "context budget (tokens)"), ("history", "history mode")):
        value = meta.get(key, "per condition")  # folders from before the history setting: the conditions'
        if value == "None":
            value = "per condition"
        rows.append(
            [label, f"study axis: {value.removeprefix('axis ')}" if value.startswith("axis ") else value]
        )
    return rows


def _transcript_link(r: EpisodeRow, out: Path, base: Path) -> str:
    if not r.transcript_md:
        return "–"
    rel = os.path.relpath(out / r.transcript_md, base)
    return f"[transcript]({Path(rel).as_posix()})"


def build_report(
    out: Path,
    *,
    prices: PriceTable | None = None,
    on_step: Callable[[str], None] | None = None,
    link_base: Path | None = None,
) -> Document:
    """The report of the bench folder ``out``; transcript links are relative to ``link_base`` (where the
    report will be written; default ``out``)."""
    step = on_step or (lambda _s: None)
    with BenchStore(out, create=False) as store:
        step("reading the bench database")
        all_rows = store.episodes()
        rounds = store.rounds(light=True)
    from . import plots  # matplotlib, imported once there is a study to draw

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

    step("per task")
    doc.sections.append(sections.per_task(done))

    step("task families and levels")
    sec = Section("By task family and level")
    sec.blocks.append(_main_table(metrics.aggregate(done, ("family", "condition")), ("family", "condition")))
    sec.blocks.append(_main_table(metrics.aggregate(done, ("level", "condition")), ("level", "condition")))
    sec.blocks.append(_main_table(metrics.aggregate(done, ("model",)), ("model",)))
    doc.sections.append(sec)

    step("success@round curves")
    curves = metrics.success_curves(done, "condition", "solved_round")
    static_curves = metrics.success_curves(done, "condition", "first_static_round")
    unknown = {c: metrics.gpu_not_run([r for r in done if r.condition == c]) for c in curves}
    chart = plots.round_curves_chart(curves, static_curves, frozenset(c for c, u in unknown.items() if u))
    sec = Section("Solved within k rounds", [Figure("success_at_round", chart,
                  "success@k per condition (solid, 95% band) and instructions-in-SASS@k (dashed)")])  # fmt: skip
    k_max = max((len(v) for v in curves.values()), default=0)
    sec.blocks.append(
        Table(
            ["condition", "measure", *(f"k={k}" for k in range(1, k_max + 1))],
            [[c, "success", *(pct(r, na=unknown[c]) for r in curves[c])] for c in curves]
            + [[c, "in SASS", *(pct(r) for r in static_curves[c])] for c in static_curves],
            caption="fraction of episodes solved (or with every target instruction in the SASS) by round k, "
            "with 95% Wilson intervals",
        )
    )
    doc.sections.append(sec)

    step("pass@k")
    doc.sections.append(sections.pass_at_k(done))

    step("external numbers")
    doc.sections.append(sections.external(done))

    step("paired comparisons")
    sec = Section("Paired comparisons between conditions")
    sec.blocks.append(Paragraph(
        "Episodes matched on task, model and sample. diff = success rate of A minus B over the pairs; p = exact "
        "two-sided McNemar test on the pairs where exactly one condition succeeded.", "note"))  # fmt: skip
    rows = []
    for field, label in (("success", "success"), ("static_ok", "in SASS")):
        for c in metrics.compare_conditions(done, field):
            ci = f" [{c.ci_low:+.2f}, {c.ci_high:+.2f}]" if c.ci_low is not None else ""
            pair_rows = [
                r
                for r in done
                if r.model == c.group["model"] and r.condition in (c.condition_a, c.condition_b)
            ]
            if field in metrics.GPU_FIELDS and metrics.gpu_not_run(pair_rows):
                rows.append([str(c.group["model"]), label, c.condition_a, c.condition_b, str(c.pairs),
                             *["–"] * 4, NA_GPU, "–"])  # fmt: skip
                continue
            rows.append([
                str(c.group["model"]), label, c.condition_a, c.condition_b, str(c.pairs), str(c.both),
                str(c.only_a), str(c.only_b), str(c.neither), f"{num(c.diff, '{:+.2f}')}{ci}", num(c.p_value, "{:.3f}"),
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

    step("cost")
    doc.sections.append(sections.cost(out, done))

    step("context per condition")
    from .context_report import context_sections

    doc.sections.extend(context_sections(out))

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
          str(r.rounds_used), (last.get(r.episode_id) or r.error or "–")[:140], num(r.speedup),
          _transcript_link(r, out, link_base or out)] for r in all_rows],
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
    target = Path(dest).expanduser().resolve() if dest is not None else out
    doc = build_report(out, prices=prices, on_step=on_step, link_base=target)
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
