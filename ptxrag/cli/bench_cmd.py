"""``ptxrag bench``, ``ptxrag report``, ``ptxrag export fixit``: run a study, report it, export fine-tuning pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .common import console, err_console, fail, quiet_model_loading


def _split(values: list[str]) -> list[str]:
    """``--tasks a,b --tasks c`` -> ``[a, b, c]``."""
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _expand_tasks(names: list[str]) -> list[str]:
    if names == ["all"]:
        from ptxrag.tasks import list_tasks

        return [t.id for t in list_tasks()]
    return names


def _summary_table(out: Path) -> Table:
    from ptxrag.bench.formatting import stage
    from ptxrag.bench.metrics import aggregate
    from ptxrag.bench.report import short_models
    from ptxrag.bench.store import BenchStore

    with BenchStore(out, create=False) as store:
        rows = short_models([r for r in store.episodes() if r.status == "done"])
    t = Table(title="finished episodes by condition and model", header_style="bold")
    for col in (
        "condition",
        "model",
        "episodes",
        "in SASS",
        "success [95% CI]",
        "GPU not run",
        "mean rounds",
    ):
        t.add_column(col)
    for s in aggregate(rows, ("condition", "model")):
        t.add_row(
            # success reads n/a, not 0%, where no episode of the group had its GPU stages run
            str(s.group["condition"]), str(s.group["model"]), str(s.episodes), stage(s, "static_ok", False),
            stage(s, "success"), str(s.unverified), f"{s.mean_rounds:.1f}" if s.mean_rounds is not None else "–",
        )  # fmt: skip
    return t


def _print_plan(spec: Any) -> None:
    from ptxrag.bench.plan import plan_bench

    plan = plan_bench(spec)
    t = Table(title=f"dry run: {len(plan.episodes)} episode(s), nothing is run", header_style="bold")
    for col in (
        "episode",
        "condition",
        "model",
        "rounds",
        "static",
        "input tokens",
        "output tokens",
        "cost USD",
    ):
        t.add_column(col, overflow="fold")
    for e in plan.episodes:
        t.add_row(
            e.episode_id, e.condition, e.model, str(e.rounds), str(e.static_tokens), f"{e.input_tokens:,}",
            f"{e.output_tokens:,}", "–" if e.cost_usd is None else f"{e.cost_usd:.2f}",
        )  # fmt: skip
    console.print(t)
    m = Table(title="per model (worst case: every episode runs all its rounds)", header_style="bold")
    for col in ("model", "episodes", "input tokens", "output tokens", "cost USD"):
        m.add_column(col)
    for model, v in plan.per_model.items():
        cost = v["cost_usd"]
        m.add_row(
            model, str(int(v["episodes"] or 0)), f"{int(v['input_tokens'] or 0):,}", f"{int(v['output_tokens'] or 0):,}",
            "– (no price in prices.toml)" if cost is None else f"{cost:.2f}",
        )  # fmt: skip
    console.print(m)
    for task, conds in plan.identical:
        console.print(f"same prompt for {task}: " + " = ".join(conds) + " (they measure the same thing)")
    a = plan.assumptions
    console.print(
        f"GPU time: at most {plan.gpu_s / 3600:.1f} h ({a['gpu_s_per_evaluation']} s per evaluation, every round "
        "reaching the GPU)"
    )
    console.print(
        f"assumptions: {int(a['reply_tokens'])} tokens per reply, {int(a['feedback_tokens'])} per verdict, retrieval "
        "fills its budget, no prompt-cache discount; counts in cl100k_base"
    )


def bench_cmd(
    out: Annotated[Path, typer.Option("--out", help="bench folder: database, checkpoints, transcripts")],
    tasks: Annotated[
        list[str], typer.Option("--tasks", help="task ids (comma-separated or repeated), or 'all'")
    ],
    models: Annotated[
        list[str], typer.Option("--models", help="model specs; replay:DIR uses DIR/<task>.toml")
    ],
    conditions: Annotated[
        list[str] | None,
        typer.Option("--conditions", help="condition names or .toml files (default: rag+templates)"),
    ] = None,
    samples: Annotated[int, typer.Option(help="episodes per (task, model, condition)")] = 1,
    max_rounds: Annotated[int, typer.Option(help="round limit per episode")] = 8,
    budget: Annotated[
        int | None, typer.Option(help="context budget in tokens (default: each condition's)")
    ] = None,
    budgets: Annotated[
        str | None,
        typer.Option(help="budgets as a study axis, e.g. 8k,16k,32k: every episode once per budget"),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            help="history mode for every episode (full, last-k, summary); several, e.g. full,summary, are a "
            "study axis: every episode once per mode (default: each condition's)"
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="print the episodes and estimated tokens, cost and GPU time; run nothing"
        ),
    ] = False,
    executor: Annotated[str, typer.Option(help="local (threads here) or ray (a Ray cluster)")] = "local",
    workers: Annotated[int, typer.Option(help="episodes in flight at once")] = 4,
    gpu_shared: Annotated[
        int,
        typer.Option(help="candidates that may run their checks on the GPU at once (ncu and timing: alone)"),
    ] = 1,
    sandbox: Annotated[str, typer.Option(help="'local' or the URL of a sandbox service")] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: start one here)")
    ] = None,
    ray_cpus: Annotated[int | None, typer.Option(help="CPUs of a Ray instance started here")] = None,
) -> None:
    """Run a study: one episode per (task, model, condition, sample), resumable.

    Re-running the same command skips finished episodes and resumes the rest. replay:DIR models read one scripted trajectory per task, DIR/<task id>.toml. Exit 0 when every episode finished, 2 otherwise."""
    from ptxrag.base.model_keys import missing_key

    if not dry_run:  # a dry run prices models without calling them: no key needed
        # said before the bench, the agent and the SDKs are imported (the study's own check says it too)
        keys = [f"model {m}: {p}" for m in dict.fromkeys(_split(models)) if (p := missing_key(m))]
        if keys:
            fail("the study cannot run:\n  " + "\n  ".join(keys))
    quiet_model_loading()  # retrieval conditions load the embedding model
    from ptxrag.bench import BenchConfigError, BenchEvent, BenchSpec, run_bench
    from ptxrag.bench.executors.ray_cluster import RayUnavailable
    from ptxrag.sandbox import ToolchainError

    conditions = conditions or ["rag+templates"]
    if executor not in ("local", "ray"):
        fail(f"--executor must be local or ray, not {executor!r}")
    from ptxrag.bench.study import parse_budget

    try:
        axis = [parse_budget(b) for b in _split([budgets])] if budgets else None
        spec = BenchSpec(
            tasks=_expand_tasks(_split(tasks)), models=_split(models), conditions=_split(conditions),
            samples=samples, max_rounds=max_rounds, budget_tokens=budget, budgets=axis,
            history=_split([history]) if history else None,
        )  # fmt: skip
    except ValueError as e:
        fail(f"invalid study settings: {e}")
    if dry_run:
        try:
            _print_plan(spec)
        except (BenchConfigError, ValueError) as e:
            fail(str(e))
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[note]}"), console=console, transient=False,
    )  # fmt: skip
    bar: dict[str, Any] = {}

    def on_event(e: BenchEvent) -> None:
        if e.kind == "plan":
            console.print(
                f"study: {e.total} episode(s); {e.already_done} already finished, {e.to_run} to run or resume"
            )
            bar["id"] = progress.add_task("episodes", total=e.to_run, note="")
            return
        tid = bar.get("id")
        label = f"{e.task_id} · {e.condition} · {e.model} · s{e.sample}"
        if e.kind == "round" and tid is not None:
            progress.update(tid, note=f"{label}: round {e.round} {'✓' if e.success else '✗'}")
        elif e.kind in ("episode_finished", "episode_failed") and tid is not None:
            mark = "[green]✓[/]" if e.success else ("[red]![/]" if e.status != "done" else "[yellow]·[/]")
            progress.console.print(
                f"{mark} {label}: {e.outcome}" + (f" ({e.round} rounds)" if e.round else "")
            )
            progress.advance(tid)

    try:
        with progress:
            summary = run_bench(
                spec, out, executor=executor, workers=workers, gpu_shared=gpu_shared, sandbox=sandbox,
                ray_address=ray_address, ray_num_cpus=ray_cpus, on_event=on_event,
            )  # fmt: skip
    except (BenchConfigError, RayUnavailable, ToolchainError, ValueError) as e:
        fail(str(e))
    console.print(_summary_table(Path(summary.out)))
    console.print(
        f"{summary.done}/{summary.total} finished ({summary.solved} solved, {summary.unverified} with GPU stages "
        f"not run), {summary.interrupted} interrupted, {summary.error} failed; {summary.wall_s:.0f} s"
    )
    console.print(f"database: {summary.database}\nreport:   ptxrag report {summary.out}")
    if not summary.complete:
        err_console.print(
            "[bold yellow]not every episode finished:[/] re-run the same command to resume them"
        )
        raise typer.Exit(2)


def report_cmd(
    folder: Annotated[Path, typer.Argument(help="a bench folder (ptxrag bench --out)")],
    dest: Annotated[
        Path | None, typer.Option("--out", help="where to write (default: the bench folder)")
    ] = None,
    prices: Annotated[Path | None, typer.Option(help="a price table (TOML) to recompute costs with")] = None,
) -> None:
    """Write report.md (figures in figures/) and one self-contained report.html."""
    from ptxrag.bench import write_report
    from ptxrag.bench.prices import PriceError, load_prices

    try:
        table = load_prices(prices) if prices is not None else None
        with console.status("report ...") as status:
            files = write_report(
                folder, dest=dest, prices=table, on_step=lambda s: status.update(f"report: {s} ...")
            )
    except (FileNotFoundError, PriceError) as e:
        fail(str(e))
    from ptxrag.bench.context_report import write_context_report

    context = write_context_report(folder, dest)  # the report's context sections alone
    console.print(f"{files.finished}/{files.episodes} episode(s) finished and reported")
    console.print(f"markdown: {files.markdown}\nhtml:     {files.html}\ncontext:  {context}")


def fixit_cmd(
    folder: Annotated[Path, typer.Argument(help="a bench folder (ptxrag bench --out)")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="JSONL file (default: FOLDER/fixit.jsonl)")
    ] = None,
    include_unverified: Annotated[
        bool, typer.Option(help="also take fixes whose GPU stages never ran (marked verified: false)")
    ] = False,
) -> None:
    """(failed attempt, evaluator feedback, later successful attempt, explanation) pairs as JSON lines."""
    from ptxrag.bench import export_fixit

    try:
        s = export_fixit(folder, output, include_unverified=include_unverified)
    except FileNotFoundError as e:
        fail(str(e))
    console.print(f"{s.records} pair(s) from {s.episodes} episode(s) -> {s.path}")
    if s.unverified_fixes_skipped:
        console.print(
            f"[yellow]{s.unverified_fixes_skipped} episode(s) skipped:[/] their fix never ran on a GPU "
            "(--include-unverified takes them, marked verified: false)"
        )


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_cmd)
    app.command("report")(report_cmd)
    export = typer.Typer(help="Export data from a bench folder.", no_args_is_help=True)
    export.command("fixit")(fixit_cmd)
    app.add_typer(export, name="export")
