"""``ptxrag sandbox ...``: evaluate a candidate kernel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .common import console, fail, styled

sandbox_app = typer.Typer(
    help="Compile, check, run, profile and time candidate kernels.", no_args_is_help=True
)


def print_report(rep) -> None:  # noqa: ANN001 - EvaluationReport; imported lazily
    verdict = "[bold green]SUCCESS[/]" if rep.success else "[bold red]NOT A SUCCESS[/]"
    console.print(f"task [bold]{rep.task_id}[/] ({rep.arch}) on {rep.gpu or 'no GPU'}: {verdict}")
    t = Table(show_header=True, header_style="bold")
    t.add_column("stage")
    t.add_column("status")
    t.add_column("s", justify="right")
    t.add_column("message", overflow="fold")
    for s in rep.stages():
        t.add_row(s.stage, styled(s.status), f"{s.wall_s:.2f}", s.message)
    console.print(t)
    if rep.static.instructions or rep.execution.instructions:
        it = Table(title="target instructions", header_style="bold")
        it.add_column("PTX")
        it.add_column("SASS in binary")
        it.add_column("predicated-on thread instr.", justify="right")
        it.add_column("executed")
        execs = {e.ptx: e for e in rep.execution.instructions}
        for p in rep.static.instructions:
            e = execs.get(p.ptx)
            it.add_row(
                p.ptx,
                ", ".join(p.sass_found) or "[red]absent[/]",
                str(e.predicated_on_thread_instructions) if e else "-",
                ("[green]yes[/]" if e.executed else "[red]no[/]") if e else "[yellow]not checked[/]",
            )
        console.print(it)
    if rep.compile.status == "failed" and rep.compile.log:
        console.print("[bold]compiler output[/]\n" + rep.compile.log, markup=False, highlight=False)


@sandbox_app.command("check")
def check(
    kernel: Annotated[
        Path | None, typer.Argument(help="candidate .cu file (default: the task's reference solution)")
    ] = None,
    task: Annotated[str, typer.Option("--task", "-t", help="task id or task folder")] = "warp-reduce-redux",
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="skip the timing stage")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="recompile even when cached")] = False,
    artifacts: Annotated[Path | None, typer.Option(help="folder for the ncu CSV and logs")] = None,
    sandbox: Annotated[str, typer.Option(help="'local' or the URL of a sandbox service")] = "local",
) -> None:
    """Evaluate KERNEL for TASK. Exit 0 when no stage failed, 1 when one did, 2 on a harness error."""
    from ptxrag.sandbox import Sandbox, SandboxConfig, ToolchainError
    from ptxrag.sandbox.service import ServiceError
    from ptxrag.tasks import TaskError, load_task

    try:
        spec = load_task(task)
    except TaskError as e:
        fail(str(e))
    path = kernel or spec.path(spec.solution)
    try:
        source = path.read_text()
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    cfg = SandboxConfig(run_timing=not no_timing, use_compile_cache=not no_cache, artifacts_dir=artifacts)
    try:
        with console.status(f"evaluating {path.name} for {spec.id} ..."):
            sb = Sandbox(cfg) if sandbox == "local" else Sandbox(cfg, url=sandbox)
            rep = sb.evaluate(spec, source)
    except (ToolchainError, ServiceError) as e:
        fail(str(e))
    if json_out:
        print(rep.model_dump_json(indent=2))
    else:
        print_report(rep)
    if any(s.status == "error" for s in rep.stages()):
        raise typer.Exit(2)
    if rep.first_failure is not None:
        raise typer.Exit(1)


@sandbox_app.command("serve")
def serve(
    host: Annotated[
        str, typer.Option(help="address to bind; anything but loopback needs a token")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8765,
    gpus: Annotated[
        str | None, typer.Option(help="comma-separated CUDA device ids, one job's GPU stages at a time each")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="file holding the bearer token (else $PTXRAG_SERVICE_TOKEN)")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="concurrent jobs (compiles run in parallel)")] = None,
    max_queue: Annotated[int, typer.Option(help="waiting jobs beyond which submissions get 429")] = 64,
    retry_after_min: Annotated[int, typer.Option(help="least Retry-After (seconds) of a 429")] = 5,
    retry_after_per_job: Annotated[
        int, typer.Option(help="Retry-After seconds of a 429 per waiting job per worker")
    ] = 10,
    state_dir: Annotated[
        Path | None, typer.Option(help="job database and artifacts (default $PTXRAG_HOME/service)")
    ] = None,
    stage_timeout: Annotated[float | None, typer.Option(help="seconds per GPU stage")] = None,
    request_timeout: Annotated[
        float, typer.Option(help="seconds a client has for a request's head, and again for its body")
    ] = 30.0,
    isolate: Annotated[
        bool, typer.Option(help="run candidates as a dedicated uid with no network (needs root)")
    ] = True,
) -> None:
    """Serve the evaluator over HTTP: submit, poll or stream, fetch reports and artifacts."""
    from ptxrag.sandbox.service import ServiceConfig, ServiceConfigError
    from ptxrag.sandbox.service.server import serve as run_server

    try:
        cfg = ServiceConfig(
            host=host,
            port=port,
            token=ServiceConfig.read_token(token_file=token_file),
            gpus=[g.strip() for g in gpus.split(",") if g.strip()] if gpus else [],
            max_queue=max_queue,
            retry_after_min_s=retry_after_min,
            retry_after_per_job_s=retry_after_per_job,
            state_dir=state_dir,
            stage_timeout_s=stage_timeout,
            request_timeout_s=request_timeout,
            isolate=isolate,
        )
        if workers is not None:
            cfg.workers = workers
        cfg.check()
    except ServiceConfigError as e:
        fail(str(e))
    console.print(
        f"ptxrag sandbox service on http://{host}:{port} (token {'required' if cfg.token else 'off: loopback only'})"
    )
    run_server(cfg)


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app, name="sandbox")
