"""What a caller needs of an evaluator, as a type: the agent and the bench depend on this, not on a class.

``ptxrag.sandbox.Sandbox`` (local, or a client of the sandbox service with ``url=``), the service's own
``ServiceClient``, the bench's staged evaluators and the tests' doubles all satisfy it structurally; none
of them subclasses it. Only the code that builds an evaluator names a concrete class.
"""

from __future__ import annotations

from typing import Protocol

from ptxrag.tasks import TaskSpec

from .results import EvaluationReport


class Evaluator(Protocol):
    """Judges one candidate ``.cu`` source for one task and returns the typed report.

    A failure the candidate caused (compile error, wrong output, instruction never executed) is data in the
    report; a failure of the evaluator itself raises (see ``ptxrag.base.errors``).
    """

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport: ...


__all__ = ["Evaluator"]
