"""``ptxrag tasks ...``: list, show and validate benchmark tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markdown import Markdown
from rich.status import Status
from rich.table import Table

from .common import console, err_console, fail, styled

if TYPE_CHECKING:
    from ptxrag.tasks import BrokenTask

tasks_app = typer.Typer(help="Benchmark tasks: list, show, validate.", no_args_is_help=True)


@tasks_app.command("list")
def list_cmd(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the tasks in the search path (PTXRAG_TASKS_PATH, then the bundled suite).

    A task folder that does not load is skipped with a warning on stderr naming the folder and the error; the others are listed and the exit status stays 0 (`tasks validate --all` exits 1 on it)."""
    from ptxrag.tasks import scan_tasks

    scan = scan_tasks()
    _warn_broken(scan.broken)
    tasks = scan.tasks
    if json_out:
        print(
            json.dumps(
                [
                    {
                        "id": t.id,
                        "family": t.family,
                        "level": t.level,
                        "arch": t.arch,
                        "required_ptx": t.required_ptx,
                        "title": t.title,
                    }
                    for t in tasks
                ],
                indent=2,
            )
        )
        return
    t = Table(header_style="bold")
    for col in ("id", "level", "family", "arch", "required PTX", "title"):
        t.add_column(col, overflow="fold")
    for task in tasks:
        t.add_row(task.id, str(task.level), task.family, task.arch, ", ".join(task.required_ptx), task.title)
    console.print(t)


def _warn_broken(broken: list[BrokenTask]) -> None:
    for b in broken:
        err_console.print(
            f"[bold yellow]warning:[/] skipped broken task {b.folder}: {b.error}", highlight=False
        )


@tasks_app.command("show")
def show(task_id: str, json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show one task: statement, tensors, shapes, required instructions, controls."""
    from ptxrag.tasks import TaskError, load_task

    try:
        task = load_task(task_id)
    except TaskError as e:
        fail(str(e))
    if json_out:
        print(task.model_dump_json(indent=2))
        return
    console.print(f"[bold]{task.id}[/]: {task.title}  (level {task.level}, {task.family}, {task.arch})")
    console.print(Markdown(task.statement.strip()))
    console.print(f"required PTX: {', '.join(task.required_ptx)}")
    console.print(f"forbidden: {', '.join(task.forbidden)}")
    console.print(f"baseline: {task.baseline}")
    for kind, tensors in (("input", task.inputs), ("output", task.outputs)):
        for x in tensors:
            console.print(f"{kind} {x.name}: {x.dtype}{list(x.shape)}")
    console.print(
        f"check shapes: {task.shapes.check} (awkward: {task.shapes.awkward}); timing: {task.shapes.timing}"
    )
    for c in task.controls:
        console.print(f"control {c.file}: must fail at {c.stages_label} -- {c.why}")


@tasks_app.command("validate")
def validate(
    task_ids: Annotated[list[str] | None, typer.Argument(help="task ids (default: all)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="validate every task")] = False,
    stage_timeout: Annotated[
        float, typer.Option(help="seconds per GPU stage (hung controls take this long)")
    ] = 60.0,
    json_out: Annotated[bool, typer.Option("--json", help="write the full result as JSON to stdout")] = False,
    save_json: Annotated[
        Path | None, typer.Option("--save-json", help="also write the full result as JSON to this file")
    ] = None,
    record_counts: Annotated[
        bool,
        typer.Option(
            "--record-counts",
            help="write each passing reference's instruction counts to the task folder (execution-counts.json)",
        ),
    ] = False,
) -> None:
    """Run each task's reference solution and negative controls through the sandbox."""
    from ptxrag.bench.task_validation import record_reference_counts, validate_task
    from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
    from ptxrag.tasks import TaskError, load_task, scan_tasks

    broken: list[BrokenTask] = []
    try:
        if all_ or not task_ids:
            scan = scan_tasks()
            tasks, broken = scan.tasks, scan.broken
            _warn_broken(broken)
        else:
            tasks = [load_task(t) for t in task_ids]
    except TaskError as e:
        fail(str(e))
    limits = StageLimits(
        correctness_s=stage_timeout, execution_s=max(stage_timeout, 120.0), timing_s=max(stage_timeout, 120.0)
    )
    sandbox = Sandbox(SandboxConfig(stage_limits=limits))
    console.print(f"GPU: {sandbox.gpu.label if sandbox.gpu else 'none (GPU stages will be skipped)'}")
    results = []
    for task in tasks:
        with console.status(task.id) as st:

            def progress(message: str, st: Status = st) -> None:
                st.update(message)

            results.append(validate_task(task, sandbox, on_progress=progress))
        if record_counts:
            written = record_reference_counts(task, results[-1].reference)
            console.print(
                f"{task.id}: counts "
                + (f"recorded in {written}" if written else "not recorded (no passed run)")
            )
    if json_out or save_json:
        doc = json.dumps(
            [
                {
                    "task": v.task.id,
                    "ok": v.ok,
                    "reference_verdict": v.reference_verdict,
                    "reference": v.reference.model_dump(mode="json"),
                    "controls": [
                        {
                            "file": c.file,
                            "must_fail_at": c.must_fail_at,
                            "failed_at": c.failed_at,
                            "verdict": c.verdict,
                            "message": c.message,
                        }
                        for c in v.controls
                    ],
                    "alternatives": [
                        {"file": a.file, "verdict": a.verdict, "message": a.message} for a in v.alternatives
                    ],
                }
                for v in results
            ],
            indent=2,
        )
        if save_json:
            save_json.write_text(doc + "\n")
        if json_out:
            print(doc)
            if broken or not all(v.ok for v in results):
                raise typer.Exit(1)
            return
    t = Table(title="reference solutions", header_style="bold")
    for col in (
        "task",
        "compile",
        "static",
        "correct",
        "execution",
        "predicated-on per instruction",
        "ref ms",
        "baseline ms",
        "speedup",
        "verdict",
    ):
        t.add_column(col, overflow="fold")
    for v in results:
        r = v.reference
        counts = (
            ", ".join(f"{e.ptx}={e.predicated_on_thread_instructions}" for e in r.execution.instructions)
            or "-"
        )
        tm = r.timing
        t.add_row(
            v.task.id,
            styled(r.compile.status),
            styled(r.static.status),
            styled(r.correctness.status),
            styled(r.execution.status),
            counts,
            f"{tm.candidate_median_ms:.4f}" if tm.candidate_median_ms is not None else "-",
            f"{tm.baseline_median_ms:.4f}" if tm.baseline_median_ms is not None else "-",
            f"{tm.speedup:.2f}" if tm.speedup is not None else "-",
            {"ok": "[green]ok[/]", "FAILED": "[bold red]FAILED[/]"}.get(
                v.reference_verdict, "[yellow]not verified[/]"
            ),
        )
    console.print(t)
    c = Table(title="negative controls", header_style="bold")
    for col in ("task", "control", "must fail at", "failed at", "verdict", "message"):
        c.add_column(col, overflow="fold")
    for v in results:
        for o in v.controls:
            c.add_row(
                v.task.id,
                o.file,
                o.must_fail_at,
                o.failed_at or "-",
                {"ok": "[green]ok[/]", "FAILED": "[bold red]FAILED[/]"}.get(
                    o.verdict, "[yellow]not verified[/]"
                ),
                o.message[:200],
            )
    console.print(c)
    if any(v.alternatives for v in results):
        a = Table(title="honest alternatives (must pass)", header_style="bold")
        for col in ("task", "solution", "verdict", "message"):
            a.add_column(col, overflow="fold")
        for v in results:
            for h in v.alternatives:
                a.add_row(
                    v.task.id,
                    h.file,
                    {"ok": "[green]ok[/]", "FAILED": "[bold red]FAILED[/]"}.get(
                        h.verdict, "[yellow]not verified[/]"
                    ),
                    h.message[:200],
                )
        console.print(a)
    if not all(v.ok for v in results):
        console.print("[bold red]validation FAILED[/]: a reference failed or a control passed")
        raise typer.Exit(1)
    if broken:
        console.print(f"[bold red]validation FAILED[/]: {len(broken)} task folder(s) do not load (see above)")
        raise typer.Exit(1)


@tasks_app.command("import")
def import_cmd(
    definition: Annotated[Path, typer.Argument(help="a FlashInfer-Trace definition JSON")],
    required_ptx: Annotated[list[str], typer.Option("--required-ptx", help="repeat per instruction")],
    to: Annotated[Path, typer.Option("--to", help="folder the task folder is written into")],
    workloads: Annotated[Path | None, typer.Option("--workloads", help="workloads or traces JSONL")] = None,
    arch: Annotated[str, typer.Option("--arch")] = "sm_90a",
    task_id: Annotated[str | None, typer.Option("--id", help="task id (default: from the name)")] = None,
) -> None:
    """Turn a FlashInfer-Trace definition (and its workloads) into a ptxrag task folder."""
    from ptxrag.tasks.fitrace import FITraceError, load_definition, load_workloads
    from ptxrag.tasks.interop import import_definition

    try:
        d = load_definition(definition)
        w = load_workloads(workloads, d) if workloads else []
        r = import_definition(d, w, required_ptx, to, arch=arch, task_id=task_id)
    except FITraceError as e:
        fail(str(e))
    for note in r.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"wrote {r.folder}: check shapes {r.check}, timing shape {r.timing}")
    console.print("solution.cu is a placeholder; add the folder to PTXRAG_TASKS_PATH to use it")


@tasks_app.command("export")
def export_cmd(
    task_id: str,
    to: Annotated[Path, typer.Option("--to", help="folder for the definition and workloads files")],
    fmt: Annotated[str, typer.Option("--format")] = "flashinfer-trace",
) -> None:
    """Write a task as a FlashInfer-Trace definition JSON plus a workloads JSONL."""
    from ptxrag.tasks import TaskError, load_task
    from ptxrag.tasks.fitrace import FITraceError
    from ptxrag.tasks.interop import write_export

    if fmt != "flashinfer-trace":
        fail(f"--format {fmt!r} is not supported; use flashinfer-trace")
    try:
        paths = write_export(load_task(task_id), to)
    except (TaskError, FITraceError) as e:
        fail(str(e))
    for p in paths:
        console.print(f"wrote {p}")


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
