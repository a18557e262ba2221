"""Shared CLI helpers: one console, error exits."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

# wide tables when output goes to a file or pipe (logs, validation records)
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True)

STATUS_STYLE = {"passed": "green", "failed": "red", "skipped": "yellow", "error": "magenta"}


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def styled(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"
