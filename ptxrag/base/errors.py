"""One exception taxonomy for ptxrag. Every error the package raises on purpose derives from
:class:`PtxragError`, split in two: a :class:`UserError` is something the person running ptxrag can fix
(a bad task, condition, config or manual); a :class:`HarnessError` is the machinery failing (sandbox,
model API, knowledge). Each message says what went wrong and what to do. The concrete classes stay in the
modules that raise them and keep their historic stdlib bases (``ValueError``, ``RuntimeError``...) so that
existing ``except`` clauses keep working. This module imports nothing of ptxrag."""

from __future__ import annotations

#: process exit codes the CLI uses; 1 is left to typer/click usage errors and uncaught bugs
EXIT_USER_ERROR = 2
EXIT_HARNESS_ERROR = 3


class PtxragError(Exception):
    """Base of every error ptxrag raises on purpose."""

    exit_code: int = EXIT_HARNESS_ERROR


class UserError(PtxragError):
    """A problem the user can fix: the input, the configuration or the local data."""

    exit_code = EXIT_USER_ERROR


class HarnessError(PtxragError):
    """The harness failed (tools, GPU service, model API, knowledge sources); the input may be fine."""

    exit_code = EXIT_HARNESS_ERROR


# -- user errors --------------------------------------------------------------------------------------
class TaskInputError(UserError):
    """A task, a kernel candidate or an instruction name is malformed or unknown."""


class ConditionInputError(UserError):
    """An experimental condition (knowledge source, budget) is malformed or unknown."""


class ConfigInputError(UserError):
    """A configuration (study, service, model, prices, replay file) is malformed or incomplete."""


class ManualInputError(UserError):
    """A PTX manual, corpus file or index is missing, malformed or built for something else."""


# -- harness errors -----------------------------------------------------------------------------------
class SandboxFailure(HarnessError):
    """The evaluator, its toolchain or its GPU service failed."""


class ModelApiFailure(HarnessError):
    """A model provider call failed."""


class KnowledgeFailure(HarnessError):
    """A knowledge source (retrieval index, documentation pack) could not answer."""


def exit_code_for(error: BaseException) -> int:
    """The CLI exit code for ``error``: 2 for user errors, 3 for harness errors, 1 for anything else."""
    if isinstance(error, PtxragError):
        return error.exit_code
    return 1
