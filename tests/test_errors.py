"""The one exception taxonomy: every error class ptxrag raises on purpose is a PtxragError, on the user or
the harness side, still catchable by its historic stdlib base; the CLI maps them to distinct exit codes."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
from pathlib import Path

import pytest

import ptxrag
from ptxrag.base.errors import (
    EXIT_HARNESS_ERROR,
    EXIT_USER_ERROR,
    HarnessError,
    PtxragError,
    UserError,
    exit_code_for,
)

ROOT = Path(ptxrag.__file__).parent
#: raised and caught inside one process boundary, never seen by a caller (the GPU worker runs stdlib-only)
PRIVATE_OK = {
    f"ptxrag.sandbox.gpu.worker.{name}"
    for name in (
        "CandidateError",
        "CandidateCudaError",
        "CandidateHang",
        "CandidateLoadError",
        "CandidateViolation",
        "HarnessError",
    )
} | {"ptxrag.sandbox.gpu.runner.CudaError"}


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(ROOT)], prefix="ptxrag."):
        if ".cli" in info.name or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def _public_exception_classes() -> list[type[BaseException]]:
    found = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # optional dependency (ray, mcp) absent: its module cannot define our errors
            continue
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == name and not obj.__name__.startswith("_"):
                found.append(obj)
    return found


def test_every_public_exception_is_a_ptxrag_error_on_one_side() -> None:
    classes = _public_exception_classes()
    assert len(classes) >= 25, "the scan found too few classes: it is not looking at the package"
    stray = [
        f"{c.__module__}.{c.__name__}"
        for c in classes
        if f"{c.__module__}.{c.__name__}" not in PRIVATE_OK
        and c.__module__ != "ptxrag.base.errors"
        and not (issubclass(c, PtxragError) and (issubclass(c, UserError) != issubclass(c, HarnessError)))
        # warning categories (warnings.warn) are not raised at a caller: outside the error taxonomy by design
        and not issubclass(c, Warning)
    ]
    assert not stray, f"exception classes outside the taxonomy: {stray}"


def test_historic_bases_still_catch() -> None:
    from ptxrag.agent_graph.conditions import ConditionError
    from ptxrag.indexer.errors import IndexNotBuiltError
    from ptxrag.sandbox.opcodes import UnknownInstruction
    from ptxrag.sandbox.toolchain import ToolchainError
    from ptxrag.tasks.loader import TaskError

    assert issubclass(TaskError, ValueError) and issubclass(TaskError, UserError)
    assert issubclass(ConditionError, ValueError) and issubclass(ConditionError, UserError)
    assert issubclass(UnknownInstruction, KeyError) and issubclass(UnknownInstruction, UserError)
    assert issubclass(ToolchainError, RuntimeError) and issubclass(ToolchainError, HarnessError)
    assert issubclass(IndexNotBuiltError, UserError)


def test_exit_codes_separate_user_from_harness() -> None:
    assert EXIT_USER_ERROR != EXIT_HARNESS_ERROR
    assert exit_code_for(UserError("x")) == EXIT_USER_ERROR
    assert exit_code_for(HarnessError("x")) == EXIT_HARNESS_ERROR
    assert exit_code_for(ValueError("x")) == 1


def test_base_imports_nothing_of_ptxrag_above_it() -> None:
    for path in (ROOT / "base").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                assert mod.startswith("ptxrag.base") or not mod.startswith("ptxrag"), f"{path.name}: {mod}"
            elif isinstance(node, ast.Import):
                assert not any(
                    a.name.startswith("ptxrag") and not a.name.startswith("ptxrag.base") for a in node.names
                )


@pytest.mark.parametrize(
    ("error", "code", "prefix"),
    [
        (UserError("bad input, fix it"), EXIT_USER_ERROR, "error: bad input"),
        (HarnessError("tool broke"), EXIT_HARNESS_ERROR, "harness error: tool broke"),
    ],
)
def test_cli_main_catches_ptxrag_errors_in_one_place(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: PtxragError,
    code: int,
    prefix: str,
) -> None:
    import ptxrag.cli as cli

    def boom(**_: object) -> None:
        raise error

    monkeypatch.setattr(cli, "app", boom)
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == code
    err = capsys.readouterr().err
    assert err.startswith(prefix) and "Traceback" not in err
    assert os.environ.get("ANTHROPIC_API_KEY") is None


def test_cli_usage_error_is_one_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # typer >= 0.29 raises its own copy of click's UsageError, which `except click...` missed: an extra
    # argument printed a 40-line traceback (2026-12-05)
    import sys

    import ptxrag.cli as cli

    monkeypatch.setattr(sys, "argv", ["ptxrag", "corpus", "list", "extra", "more"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unexpected extra argument" in err and "Traceback" not in err and "│" not in err
