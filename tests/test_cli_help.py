"""Every command's help: the summary the command list shows is one paragraph without hard line breaks
(rich keeps a docstring's line breaks, so a wrapped docstring breaks mid-sentence in ``ptxrag --help``)."""

from __future__ import annotations

from typing import Any

import typer

from ptxrag.cli import app


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    out: list[tuple[str, Any]] = []

    def walk(c: Any, path: list[str]) -> None:
        if hasattr(c, "list_commands"):
            for name in c.list_commands(ctx):
                walk(c.get_command(ctx, name), [*path, name])
        else:
            out.append((" ".join(path), c))

    walk(root, [])
    return out


def test_the_walk_finds_every_command():
    names = {n for n, _ in _commands()}
    assert {"run", "demo", "bench", "report", "export fixit", "tasks list", "sandbox check"} <= names


def test_no_command_summary_wraps_mid_sentence():
    wrapped = [n for n, c in _commands() if "\n" in (c.help or "").strip().split("\n\n")[0]]
    assert wrapped == []


def test_no_help_paragraph_has_a_hard_line_break():
    """Rich keeps single line breaks of every paragraph, so a docstring wrapped at the source width reads
    as a broken sentence in the terminal; paragraphs are one line each, separated by blank lines."""
    broken = [
        n for n, c in _commands() if any("\n" in p.strip() for p in (c.help or "").strip().split("\n\n"))
    ]
    assert broken == []
