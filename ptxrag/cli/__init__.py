"""The ``ptxrag`` command line. Each command group lives in its own module and registers itself here;
the CLI prints, the library returns."""

from __future__ import annotations

import importlib

import typer

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
    app()
