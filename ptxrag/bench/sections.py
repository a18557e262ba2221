"""The report's sections per task, pass@k, cost efficiency and external numbers (see report.py for the
rest). Each takes the finished episodes and returns one :class:`Section`."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from . import metrics
from .external import ptxbench
from .formatting import NA_GPU, num, pct, stage
from .metrics import GroupSummary
from .records import EpisodeRow
from .render import Figure, Paragraph, Section, Table
from .store import BenchStore
from .study import parse_budget


def _column(r: EpisodeRow, models: int) -> str:
    return r.condition if models == 1 else f"{r.condition} · {r.model}"


def per_task(done: list[EpisodeRow]) -> Section:
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
            NA_GPU if s.gpu_not_run else num(s.mean_rounds_to_success, "{:.1f}"),
            num(s.mean_rounds_to_static, "{:.1f}"),
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


def pass_at_k(done: list[EpisodeRow]) -> Section:
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
                (NA_GPU if p.gpu_not_run else num(p.values.get(k), "{:.2f}")) if k in p.values else "–"
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
    """episode id -> its context budget in tokens: what its transcript says it ran with, else the budget
    axis value in its condition name (``templates@8k``), else the study's --budget, else the condition's
    own as its file says now (which may have changed since the episode ran)."""
    with BenchStore(out, create=False) as store:
        fixed = store.meta().get("budget_tokens", "per condition")
    own: dict[str, str] = {}
    labels = {}
    for r in rows:
        ran_with = _transcript_budget(out, r)
        on_axis = _AXIS_BUDGET.search(r.condition) if fixed.startswith("axis") else None
        if ran_with is not None:
            labels[r.episode_id] = str(ran_with)
        elif on_axis:
            labels[r.episode_id] = str(parse_budget(on_axis.group(1)))
        elif fixed not in ("per condition", "None") and not fixed.startswith("axis"):
            labels[r.episode_id] = fixed
        else:
            if r.condition_spec not in own:
                own[r.condition_spec] = _condition_budget(r.condition_spec)
            labels[r.episode_id] = own[r.condition_spec]
    return labels


#: the budget in a condition name on the budget axis: ``templates@8k``, ``rag@16000/full``
_AXIS_BUDGET = re.compile(r"@(\d+k?)(?:/|$)")


def _transcript_budget(out: Path, r: EpisodeRow) -> int | None:
    """The budget in the header line of the episode's ``transcript.jsonl`` (None without one)."""
    if not r.transcript_jsonl:
        return None
    try:
        with (out / r.transcript_jsonl).open(encoding="utf-8") as f:
            value = json.loads(f.readline()).get("budget_tokens")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) else None


def _condition_budget(spec: str) -> str:
    path = Path(spec) if spec.endswith(".toml") else _BUILTIN_CONDITIONS / f"{spec}.toml"
    try:
        return str(tomllib.loads(path.read_text()).get("budget_tokens", "default"))
    except (OSError, tomllib.TOMLDecodeError):
        return "?"


#: the built-in conditions' TOML files (read as data: importing the agent package would load LangGraph)
_BUILTIN_CONDITIONS = Path(__file__).resolve().parents[1] / "agent_graph" / "conditions"


def cost(out: Path, done: list[EpisodeRow]) -> Section:
    from . import plots

    sec = Section("Cost efficiency")
    budgets = _budget_labels(out, done)
    rows = [
        r.model_copy(update={"condition": f"{r.condition} (budget {budgets[r.episode_id]})"}) for r in done
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
          NA_GPU if e.gpu_not_run else str(e.solved), str(e.in_sass), str(e.tokens), num(e.cost_usd, "{:.4f}"),
          why(e) if e.tokens_per_solved is None else f"{e.tokens_per_solved:.0f}",
          why(e) if e.cost_per_solved_usd is None else f"{e.cost_per_solved_usd:.4f}",
          num(e.tokens_per_in_sass, "{:.0f}")] for e in eff],
    ))  # fmt: skip
    return sec


def external(done: list[EpisodeRow]) -> Section:
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
