"""The ``ptxrag`` command line. Each command group lives in its own module and registers itself here;
the CLI prints, the library returns."""

from __future__ import annotations

import importlib

import click
import typer

from ptxrag.base.errors import EXIT_USER_ERROR, PtxragError, UserError, exit_code_for

app = typer.Typer(
    name="ptxrag",
    help="Agents that write GPU kernels with new PTX instructions, and an evaluator that proves they ran.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

#: command modules; each defines ``register(app)``
COMMAND_MODULES = [
    "ptxrag.cli.sandbox_cmd",
    "ptxrag.cli.tasks_cmd",
    "ptxrag.cli.agent_cmd",
    "ptxrag.cli.bench_cmd",
    "ptxrag.cli.corpus_cmd",
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Entry point. Any :class:`PtxragError` a command lets through is caught here, in one place: one line
    on stderr, exit code 2 for user errors and 3 for harness errors (typer's own usage errors stay 2 and
    unexpected bugs keep their traceback)."""
    try:
        code = app(standalone_mode=False)  # returns the exit code of typer.Exit instead of exiting
    except PtxragError as e:
        kind = "error" if isinstance(e, UserError) else "harness error"
        typer.echo(f"{kind}: {e}", err=True)
        raise SystemExit(exit_code_for(e)) from None
    except (click.exceptions.Abort, typer.Abort):
        typer.echo("Aborted.", err=True)
        raise SystemExit(1) from None
    except (click.exceptions.Exit, typer.Exit) as e:
        raise SystemExit(e.exit_code) from None
    except (click.exceptions.ClickException, typer.TyperException) as e:
        # typer >= 0.29 raises its own copy of click's exceptions (a usage error is a TyperException there)
        show = getattr(e, "show", None)
        if callable(show):
            show()
        else:
            typer.echo(f"error: {e}", err=True)
        raise SystemExit(getattr(e, "exit_code", EXIT_USER_ERROR)) from None
    raise SystemExit(code if isinstance(code, int) else 0)
