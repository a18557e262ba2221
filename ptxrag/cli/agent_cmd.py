"""``ptxrag run``, ``ptxrag demo``, ``ptxrag mcp``: the agent from the command line."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .common import console, err_console, fail, quiet_model_loading

#: what the demo's three rounds must show (checked, so the demo fails loudly when a part misbehaves)
DEMO_TASK = "warp-reduce-redux"


def _progress_table(result: Any) -> Table:
    t = Table(title=f"episode {result.episode_id}", header_style="bold")
    for col in (
        "round",
        "outcome",
        "knowledge (tokens)",
        "per layer, history, request",
        "retrieved sections",
        "model tokens in/out",
        "eval s",
    ):
        t.add_column(col, overflow="fold")
    for r in result.rounds:
        secs = ", ".join(
            f"{s.source}:{s.section_number}" for s in (r.retrieved.sections if r.retrieved else [])
        )
        know = f"static {r.static_tokens} + retrieved {r.retrieved_tokens} / {result.budget_tokens}"
        style = "green" if r.success else ("yellow" if r.report and r.report.first_failure is None else "red")
        layers = ", ".join(f"{k} {v}" for k, v in r.layer_tokens.items()) or "-"
        t.add_row(
            str(r.round),
            f"[{style}]{r.outcome}[/]",
            know,
            f"{layers}; history {r.history_tokens}; request {r.sent_tokens}",
            secs[:300] or "-",
            f"{r.usage.input_tokens}/{r.usage.output_tokens}",
            f"{r.eval_wall_s:.1f}",
        )
    return t


def _run_with_progress(*, progress_to_stderr: bool = False, **kwargs: Any) -> Any:
    from ptxrag.agent_graph import run_task

    out = err_console if progress_to_stderr else console
    max_rounds = kwargs.get("max_rounds", 8)
    with out.status("starting ...") as status:

        def on_event(ev: Any) -> None:
            if ev.kind == "stage":
                status.update(
                    f"round {ev.round}/{max_rounds}: {ev.stage} ..." if ev.round else f"{ev.stage} ..."
                )
            elif ev.kind == "round":
                unverified = "GPU stages not run" in ev.outcome
                mark = "[green]✓[/]" if ev.success else ("[yellow]?[/]" if unverified else "[red]✗[/]")
                out.print(f"round {ev.round}: {mark} {ev.outcome}", markup=True, highlight=False)

        return run_task(on_event=on_event, **kwargs)


def resume_command(result: Any, *, sandbox: str = "local", history: str | None = None) -> str:
    """The whole command that resumes ``result``'s episode (model, condition, limits, runs folder, id)."""
    import shlex
    from pathlib import Path

    cond = result.condition
    args = ["ptxrag", "run", result.task_id, "--model", result.model]
    args += [
        "--condition",
        cond.source_file if cond.source_file and not cond.source_file.startswith("builtin:") else cond.name,
    ]
    args += ["--max-rounds", str(result.max_rounds), "--budget", str(result.budget_tokens)]
    args += ["--history", history or cond.history.mode]
    if sandbox != "local":
        args += ["--sandbox", sandbox]
    args += ["--runs-dir", str(Path(result.checkpoint_db).parent), "--episode", result.episode_id]
    return shlex.join(args)


def _summary(result: Any, resume: str = "") -> None:
    console.print(_progress_table(result))
    best = result.best
    console.print(
        f"stop: [bold]{result.stop_reason}[/] after {len(result.rounds)} round(s); best round: "
        f"{result.best_round if best else '-'}" + (f" ({best.outcome})" if best else "")
    )
    u = result.usage
    console.print(
        f"model tokens: {u.input_tokens} in, {u.output_tokens} out ({u.cache_read_tokens} from cache)"
    )
    console.print(f"transcript: {result.transcript_md}\n            {result.transcript_jsonl}")
    if result.interrupted:
        err_console.print(f"[bold red]interrupted:[/] {result.error}")
        err_console.print(
            "resume with:", resume or resume_command(result), markup=False, highlight=False, soft_wrap=True
        )


def run_cmd(
    task_id: Annotated[
        str | None,
        typer.Argument(help="task id or task folder (leave out with --episode to resume it as it was)"),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="anthropic:<model> | openai:<model>@<base_url> | replay:<file>")
    ] = None,
    condition: Annotated[
        str | None, typer.Option(help="built-in condition name or a .toml file (default rag+templates)")
    ] = None,
    max_rounds: Annotated[int, typer.Option(help="round limit")] = 8,
    sandbox: Annotated[str, typer.Option(help="'local' or the URL of a sandbox service")] = "local",
    budget: Annotated[
        int | None, typer.Option(help="context budget in tokens (default: the condition's)")
    ] = None,
    episode: Annotated[str | None, typer.Option(help="episode id: resumes it when it exists")] = None,
    runs_dir: Annotated[Path | None, typer.Option(help="where checkpoints and transcripts go")] = None,
    history: Annotated[
        str | None, typer.Option(help="history mode: full, last-k or summary (default: the condition's)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Run the agent on one task (resumable with --episode).

    Exit 0 when solved (or nothing failed and only GPU stages were skipped), 1 when the round limit was reached, 2 on a harness failure."""
    from ptxrag.base.model_keys import missing_key

    if model is not None and (problem := missing_key(model)):
        fail(problem)  # before the agent and the model SDKs are imported: a missing key is said at once
    quiet_model_loading()  # a retrieval condition loads the embedding model
    from ptxrag.agent_graph import ConditionError, EpisodeMismatch, ModelConfigError, RetrievalUnavailable
    from ptxrag.agent_graph.episode import stored_episode
    from ptxrag.tasks import TaskError

    cond: Any = condition or "rag+templates"
    try:
        if task_id is None or model is None:
            if episode is None:
                fail("give a task and --model, or --episode ID alone to resume an episode as it was started")
            if task_id is not None or model is not None or condition is not None:
                fail("--episode alone resumes as the episode was started; give the task, --model and "
                     "--condition too, or none of them")  # fmt: skip
            stored = stored_episode(episode, runs_dir)
            task_id, model, cond = stored["task"], stored["model"], stored["condition"]
            max_rounds = stored["max_rounds"]
            if str(stored["sandbox"]).startswith(("http://", "https://")):
                sandbox = stored["sandbox"]
        result = _run_with_progress(
            task=task_id,
            model=model,
            condition=cond,
            max_rounds=max_rounds,
            sandbox=sandbox,
            budget_tokens=budget,
            episode_id=episode,
            runs_dir=runs_dir,
            history=history,
            progress_to_stderr=json_out,
        )
    except (
        TaskError,
        ConditionError,
        ModelConfigError,
        RetrievalUnavailable,
        EpisodeMismatch,
        ValueError,
    ) as e:
        fail(str(e))
    resume = resume_command(result, sandbox=sandbox, history=history)
    if json_out:
        print(result.model_dump_json(indent=2))
        if result.interrupted:
            err_console.print("resume with:", resume, markup=False, highlight=False, soft_wrap=True)
    else:
        _summary(result, resume)
    if result.interrupted:
        raise typer.Exit(2)
    if result.stop_reason == "round_limit":
        raise typer.Exit(1)


def _demo_retriever() -> tuple[Any | None, str]:
    """The real retriever if it can serve the pack or a manual; else None and why."""
    from ptxrag.agent_graph.retrieval import RetrievalUnavailable, default_retriever

    try:
        r = default_retriever()
        r.version_for_arch("sm_90a")
        hits = r.search("redux.sync", k=1)
    except RetrievalUnavailable as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - any index problem: fall back and say so
        return None, f"the retriever is not usable here: {type(e).__name__}: {e}"
    if not hits:
        return None, "the retrieval index is empty (run `ptxrag index`)"
    return r, ""


def demo_cmd(
    runs_dir: Annotated[Path | None, typer.Option(help="where checkpoints and transcripts go")] = None,
) -> None:
    """Offline demo: a scripted model solves warp-reduce-redux in three rounds.

    The model's replies come from ptxrag/agent_graph/demo/warp-reduce-redux.toml; the graph, retriever and sandbox are the real ones. Exit 0 when every part behaved as designed."""
    quiet_model_loading()  # the retriever loads the embedding model once an index exists
    from ptxrag.agent_graph import KnowledgeUnavailable, SandboxError
    from ptxrag.sandbox import Sandbox, ToolchainError

    replay = Path(str(resources.files("ptxrag.agent_graph") / "demo" / f"{DEMO_TASK}.toml"))
    retriever, why = _demo_retriever()
    condition = "rag+templates" if retriever is not None else "templates"
    console.print(
        f"[bold]ptxrag demo[/]: task {DEMO_TASK}, scripted model (replay:{replay.name}), real sandbox"
    )
    if retriever is None:
        console.print(f"[yellow]no retrieval:[/] {why}")
        console.print(
            "[yellow]falling back to static knowledge[/] (condition 'templates'); `ptxrag index` enables retrieval"
        )
    else:
        console.print(
            f"condition {condition}: retrieved manual and contract excerpts each round, plus the template header"
        )
    sandbox = Sandbox()
    console.print(
        f"GPU: {sandbox.gpu.label if sandbox.gpu else 'none here: the GPU stages will say skipped: no GPU'}"
    )
    try:
        result = _run_with_progress(
            task=DEMO_TASK,
            model=f"replay:{replay}",
            condition=condition,
            max_rounds=3,
            sandbox=sandbox,
            retriever=retriever,
            runs_dir=runs_dir,
        )
    except (KnowledgeUnavailable, ToolchainError, SandboxError) as e:
        fail(str(e))
    _summary(result)
    problems = demo_problems(result, gpu=sandbox.gpu is not None)
    if problems:
        for p in problems:
            err_console.print(f"[bold red]demo did not behave as designed:[/] {p}")
        raise typer.Exit(1)
    if sandbox.gpu is None:
        console.print(
            "\n[bold]What a GPU run adds[/] (Hopper, e.g. H200): round 3 would also be checked for correctness on fresh "
            "random inputs (including the awkward 1000x999 shape), Nsight Compute would show redux.sync's "
            "predicated-on thread count above zero, and it would be timed against torch.sum; the episode would "
            "end 'solved' instead of 'unverified_no_gpu'."
        )
    console.print("[bold green]demo behaved as designed[/]")


def demo_problems(result: Any, *, gpu: bool) -> list[str]:
    """What is wrong with a demo episode (empty when round 1 failed to compile, round 2 compiled
    without a live redux.sync, and round 3 passed everything this machine can check)."""
    rs = result.rounds
    if result.interrupted:
        return [f"interrupted: {result.error}"]
    if len(rs) != 3:
        return [f"expected 3 rounds, got {len(rs)} (stop: {result.stop_reason})"]
    out = []
    r1, r2, r3 = (r.report for r in rs)
    if r1 is None or r1.compile.status != "failed":
        out.append(f"round 1 should not compile: {rs[0].outcome}")
    if (
        r2 is None
        or r2.compile.status != "passed"
        or not (r2.static.status == "failed" or r2.execution.status == "failed")
    ):
        out.append(f"round 2 should compile without a live redux.sync: {rs[1].outcome}")
    want = "solved" if gpu else "unverified_no_gpu"
    if result.stop_reason != want:
        out.append(f"round 3 should end the episode {want!r}: {rs[2].outcome}")
    if (
        not gpu
        and r3 is not None
        and any(
            s.status != "skipped" or "no GPU" not in s.message
            for s in (r3.correctness, r3.execution, r3.timing)
        )
    ):
        out.append("without a GPU the GPU stages must say 'skipped: no GPU'")
    return out


def mcp_cmd(
    home: Annotated[
        Path | None,
        typer.Option(help="data directory with the index (default: PTXRAG_HOME); MCP clients often start "
                     "servers with a clean environment, so give it here"),
    ] = None,
) -> None:  # fmt: skip
    """Serve search_ptx_docs, read_section, list_tasks and evaluate_kernel over MCP (stdio)."""
    import os

    quiet_model_loading()
    from ptxrag.agent_graph.mcp_server import serve

    if home is not None:
        home = home.expanduser().resolve()
        # the whole process (sandbox compile cache too) uses this home, as if PTXRAG_HOME were set
        os.environ["PTXRAG_HOME"] = str(home)
    serve(home)


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("demo")(demo_cmd)
    app.command("mcp")(mcp_cmd)
