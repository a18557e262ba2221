"""``write_report``: the study's tables and figures from a bench folder, as Markdown and one HTML page.

Only finished episodes enter the metrics; interrupted, failed and pending ones are counted and named so a
reader knows the study is incomplete. Episodes whose GPU stages never ran are flagged: their correctness,
execution and speed are unknown, which is not the same as failed.
"""

from __future__ import annotations

import datetime as dt
import os
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from . import metrics
from .external import ptxbench
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


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _est(e: Estimate) -> str:
    if e.value is None:
        return "–"
    return f"{e.value:.2f}× (n={e.n}) [{e.ci_low:.2f}–{e.ci_high:.2f}]"


def _reprice(rows: list[EpisodeRow], prices: PriceTable) -> list[EpisodeRow]:
    return [r.model_copy(update={"cost_usd": prices.cost_usd(r.model, r)}) for r in rows]


def short_models(rows: list[EpisodeRow]) -> list[EpisodeRow]:
    """Short model names for tables (``replay:/long/path`` -> ``replay:dir``), unless two would clash."""
    labels = {m: model_label(m) for m in {r.model for r in rows}}
    if len(set(labels.values())) < len(labels):
        return rows
    return [r.model_copy(update={"model": labels[r.model]}) for r in rows]


def stage(s: GroupSummary, field: str, ci: bool = True) -> str:
    """A funnel stage's rate with its Wilson interval, or n/a when only the GPU could decide it and it never ran."""
    return pct(s.rates[field], ci, na=s.gpu_not_run and field in metrics.GPU_FIELDS)


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
                _num(s.mean_rounds, "{:.1f}"),
                _est(s.geomean_speedup),
                *(
                    NA_GPU if s.gpu_not_run else _num(s.fast_p[f"fast_{p:g}"], "{:.2f}")
                    for p in metrics.FAST_P
                ),
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


def _column(r: EpisodeRow, models: int) -> str:
    return r.condition if models == 1 else f"{r.condition} · {r.model}"


def _per_task_section(done: list[EpisodeRow]) -> Section:
    """The task x condition table the study's paper prints, and its heatmap."""
    from . import plots

    sec = Section("Per task and condition")
    models = len({r.model for r in done})
    tasks = sorted({r.task_id for r in done})
    columns = sorted({_column(r, models) for r in done})
    cells = {(str(s.group["task_id"]), str(s.group["column"])): s for s in _by_task_column(done, models)}

    def rate_cell(s: GroupSummary, f: str) -> tuple[float | None, str]:
        if s.gpu_not_run and f in metrics.GPU_FIELDS:
            return None, "n/a"
        r = s.rates[f]
        return r.rate, f"{100 * (r.rate or 0):.0f}%\n{r.hits}/{r.n}"

    def rounds_cell(s: GroupSummary) -> tuple[float | None, str]:
        if s.gpu_not_run:
            return None, "n/a"
        v = s.mean_rounds_to_success
        return v, "–" if v is None else f"{v:.1f}"

    panels = [
        ("success", {k: rate_cell(v, "success") for k, v in cells.items()}, "Greens"),
        ("in SASS", {k: rate_cell(v, "static_ok") for k, v in cells.items()}, "Blues"),
        ("executed", {k: rate_cell(v, "executed") for k, v in cells.items()}, "Purples"),
        ("rounds to success", {k: rounds_cell(v) for k, v in cells.items()}, "Oranges_r"),
    ]
    sec.blocks.append(
        Figure(
            "per_task",
            plots.task_heatmap(tasks, columns, panels),
            "success, instructions in SASS, executed (fraction of episodes) and mean rounds to success, per task "
            "and condition",
        )  # fmt: skip
    )
    rows = []
    for (task, col), s in sorted(cells.items()):
        rows.append([
            task, col, str(s.episodes), stage(s, "static_ok"), stage(s, "executed"), stage(s, "success"),
            NA_GPU if s.gpu_not_run else _num(s.mean_rounds_to_success, "{:.1f}"),
            _num(s.mean_rounds_to_static, "{:.1f}"),
        ])  # fmt: skip
    sec.blocks.append(
        Table(
            [
                "task",
                "condition" if models == 1 else "condition · model",
                "episodes",
                "in SASS [95% CI]",
                "executed [95% CI]",
                "success [95% CI]",
                "rounds to success (mean)",
                "rounds to in SASS (mean)",
            ],
            rows,
        )  # fmt: skip
    )
    return sec


def _by_task_column(done: list[EpisodeRow], models: int) -> list[GroupSummary]:
    groups: dict[tuple[str, str], list[EpisodeRow]] = {}
    for r in done:
        groups.setdefault((r.task_id, _column(r, models)), []).append(r)
    return [metrics.summarize(g, {"task_id": t, "column": c}) for (t, c), g in sorted(groups.items())]


def _pass_at_k_section(done: list[EpisodeRow]) -> Section:
    from . import plots

    sec = Section("pass@k over samples")
    sec.blocks.append(Paragraph(
        "pass@k: the chance that at least one of k episodes (samples) of a task succeeds, with the unbiased "
        "estimator 1 - C(n-c, k)/C(n, k) over each task's n samples of which c succeeded, averaged over tasks. "
        "It differs from 'solved within k rounds', which counts rounds inside one episode. Run the bench with "
        "`--samples N` for k up to N.", "note"))  # fmt: skip
    succ = metrics.pass_at_k_table(done, ("condition", "model"), "success")
    sass = metrics.pass_at_k_table(done, ("condition", "model"), "static_ok")
    k_max = max((max(p.values, default=0) for p in succ), default=0)
    rows = []
    for label, table in (("success", succ), ("in SASS", sass)):
        for p in table:
            vals = [
                (NA_GPU if p.gpu_not_run else _num(p.values.get(k), "{:.2f}")) if k in p.values else "–"
                for k in range(1, k_max + 1)
            ]
            rows.append(
                [
                    str(p.group["condition"]),
                    str(p.group["model"]),
                    label,
                    str(p.tasks),
                    str(p.samples_min),
                    *vals,
                ]
            )
    sec.blocks.append(
        Table(["condition", "model", "measure", "tasks", "samples per task", *(f"pass@{k}" for k in range(1, k_max + 1))], rows)
        if rows else Paragraph("no finished episodes")
    )  # fmt: skip
    known = any(not p.gpu_not_run and any(v is not None for v in p.values.values()) for p in succ)
    table = succ if known else sass
    what = "success" if known else "instructions in SASS (success is n/a: the GPU stages did not run)"
    sec.blocks.append(Figure(
        "pass_at_k",
        plots.pass_at_k_chart(
            {f"{p.group['condition']} · {p.group['model']}": p.values for p in table}, f"pass@k: {what}"),
        f"pass@k of {what} per condition and model"))  # fmt: skip
    return sec


def _budget_labels(out: Path, rows: list[EpisodeRow]) -> dict[str, str]:
    """condition spec -> its context budget in tokens: the study's --budget, else the condition's own."""
    with BenchStore(out, create=False) as store:
        fixed = store.meta().get("budget_tokens", "per condition")
    labels = {}
    for spec in {r.condition_spec for r in rows}:
        if fixed not in ("per condition", "None"):
            labels[spec] = fixed
            continue
        path = Path(spec) if spec.endswith(".toml") else _BUILTIN_CONDITIONS / f"{spec}.toml"
        try:
            labels[spec] = str(tomllib.loads(path.read_text()).get("budget_tokens", "default"))
        except (OSError, tomllib.TOMLDecodeError):
            labels[spec] = "?"
    return labels


#: the built-in conditions' TOML files (read as data: importing the agent package would load LangGraph)
_BUILTIN_CONDITIONS = Path(__file__).resolve().parents[1] / "agent_graph" / "conditions"


def _cost_section(out: Path, done: list[EpisodeRow]) -> Section:
    from . import plots

    sec = Section("Cost efficiency")
    budgets = _budget_labels(out, done)
    rows = [
        r.model_copy(update={"condition": f"{r.condition} (budget {budgets[r.condition_spec]})"})
        for r in done
    ]
    eff = metrics.cost_efficiency(rows, ("condition", "model"))
    sec.blocks.append(Paragraph(
        "Tokens (input + output, every round) and dollars spent per solved episode: the whole group's spend "
        "divided by its solved episodes, so failed episodes are paid for by the successes. 'per episode in "
        "SASS' divides by the episodes whose best attempt had every target instruction in the binary (checkable "
        "without a GPU). Budget: the context budget of the condition in tokens per round.", "note"))  # fmt: skip

    def why(e: metrics.CostEfficiency) -> str:
        return "n/a: GPU not run" if e.gpu_not_run else "none solved"

    fig_rows = [
        (f"{e.group['condition']}\n{e.group['model']}", e.tokens_per_solved, e.tokens_per_in_sass,
         e.cost_per_solved_usd, why(e))
        for e in eff
    ]  # fmt: skip
    sec.blocks.append(Figure("cost", plots.cost_chart(fig_rows),
                             "tokens and cost per solved episode, by condition (with its budget) and model"))  # fmt: skip
    sec.blocks.append(Table(
        ["condition (budget)", "model", "episodes", "solved", "in SASS", "tokens", "cost (USD)",
         "tokens per solved", "cost per solved (USD)", "tokens per episode in SASS"],
        [[str(e.group["condition"]), str(e.group["model"]), str(e.episodes),
          NA_GPU if e.gpu_not_run else str(e.solved), str(e.in_sass), str(e.tokens), _num(e.cost_usd, "{:.4f}"),
          why(e) if e.tokens_per_solved is None else f"{e.tokens_per_solved:.0f}",
          why(e) if e.cost_per_solved_usd is None else f"{e.cost_per_solved_usd:.4f}",
          _num(e.tokens_per_in_sass, "{:.0f}")] for e in eff],
    ))  # fmt: skip
    return sec


def _external_section(done: list[EpisodeRow]) -> Section:
    ext = ptxbench()
    sec = Section("External: PTXBench's published numbers (not measured here)")
    sec.blocks.append(Paragraph(
        f"Source: {ext.source}. Measure: {ext.measure}. These are another study's numbers on its own workloads "
        "and harness, copied as published; the 95% Wilson intervals are computed here from their counts. They "
        "are comparable in kind, not in detail, to this study's success within k rounds on the nearest task.",
        "warning"))  # fmt: skip
    for w in ext.workloads:
        mine = [r for r in done if r.task_id in w.ptxrag_tasks]
        rows = []
        for m in dict.fromkeys(x.model for x in w.results):
            res = {x.rounds: x for x in w.results if x.model == m}
            rows.append([f"{m} (PTXBench, external)", w.name, *(
                pct(metrics.rate([True] * res[k].hits + [False] * (res[k].n - res[k].hits))) if k in res else "–"
                for k in (1, 4, 8))])  # fmt: skip
        groups: dict[tuple[str, str, str], list[EpisodeRow]] = {}
        for r in mine:
            groups.setdefault((r.model, r.condition, r.task_id), []).append(r)
        for (model, cond, task), g in sorted(groups.items()):
            s = metrics.summarize(g, {})
            cells = []
            for k in (1, 4, 8):
                if k > max(r.max_rounds for r in g):
                    cells.append("– (round limit)")
                elif s.gpu_not_run:
                    cells.append(NA_GPU)
                else:
                    cells.append(pct(metrics.success_at_round([r.solved_round for r in g], k)[k - 1]))
            rows.append([f"{model} · {cond} (this study)", task, *cells])
        sec.blocks.append(Table(["model", "workload / task", "k=1", "k=4", "k=8"], rows))
        if not mine:
            sec.blocks.append(Paragraph(
                f"This study has none of the nearest ptxrag tasks ({', '.join(w.ptxrag_tasks)}): the external "
                "numbers stand alone, for reference.", "note"))  # fmt: skip
    return sec


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
    doc.sections.append(_per_task_section(done))

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
    unknown = {c: metrics.gpu_not_run([r for r in done if r.condition == c]) for c in curves}
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
    doc.sections.append(_pass_at_k_section(done))

    step("external numbers")
    doc.sections.append(_external_section(done))

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

    step("cost")
    doc.sections.append(_cost_section(out, done))

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
