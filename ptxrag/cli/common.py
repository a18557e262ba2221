"""Shared CLI helpers: one console, error exits."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.console import Console

# wide tables when output goes to a file or pipe (logs, validation records)
console = Console(width=None if sys.stdout.isatty() else 200)
# messages on a pipe or in a log are not wrapped: a path or command broken across lines cannot be pasted back
err_console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())

STATUS_STYLE = {"passed": "green", "failed": "red", "skipped": "yellow", "error": "magenta"}


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def styled(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def quiet_model_loading() -> None:
    """No progress bars or load reports of Hugging Face's own while the embedding model loads (transformers
    draws a tqdm "Loading weights" bar on stderr). Call before anything imports transformers: the
    environment is read once, at import; if it is already imported its bar is switched off directly.
    A user's own setting of these variables wins."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
