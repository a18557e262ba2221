"""The GPU worker's line protocol, shared by both sides: the evaluator (``worker_client.py``, ``stages/``)
and ``worker.py``, which imports this file by path (standard library only).

One JSON object per line. The parent sends a ``Command``; the worker answers each with one reply: a
``Failure`` (``ok`` false, ``kind`` says whose fault) or the command's own reply with ``ok`` true.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, TypedDict


class LoadCommand(TypedDict):
    cmd: Literal["load"]
    job: str  # path of the job JSON (evaluator: worker_job)


class CorrectnessCommand(TypedDict):
    cmd: Literal["correctness"]
    save_inputs: str | None  # directory for the first check's inputs (the profiled launch replays them)


class VerifyProfiledCommand(TypedDict):
    cmd: Literal["verify_profiled"]
    dir: str


class MutantCommand(TypedDict):
    cmd: Literal["mutant"]
    library: str
    tag: int
    limit_s: float
    spares: NotRequired[int]  # candidate processes to keep started for the next mutants


class ResetCommand(TypedDict):
    """End the job: its candidate processes (and spares started during it) are closed."""

    cmd: Literal["reset"]


class SpawnCommand(TypedDict):
    """Start ``n`` spare candidate processes (after the parent swept the finished job's processes)."""

    cmd: Literal["spawn"]
    n: int


class TimingCommand(TypedDict):
    cmd: Literal["timing"]


class ExitCommand(TypedDict):
    cmd: Literal["exit"]


Command = (
    LoadCommand
    | CorrectnessCommand
    | VerifyProfiledCommand
    | MutantCommand
    | TimingCommand
    | ResetCommand
    | SpawnCommand
    | ExitCommand
)
COMMANDS = ("load", "correctness", "verify_profiled", "mutant", "timing", "reset", "spawn", "exit")

#: whose fault a failure is: the candidate's library did not load; run-time evidence of a forbidden
#: behaviour; ptxrag_launch returned an error; a CUDA fault (the candidate's process is gone); ours
FailureKind = Literal["load", "violation", "candidate", "cuda", "harness"]


class Failure(TypedDict):
    ok: Literal[False]
    kind: FailureKind
    error: str
    traceback: NotRequired[str]


class Ready(TypedDict):
    ok: Literal[True]
    ready: Literal[True]
    gpu: str


class ChecksReply(TypedDict):
    ok: Literal[True]
    checks: list[dict[str, Any]]  # each the fields of results.CheckResult (+ "seed")


MutantOutcomeKind = Literal["checks", "hung", "faulted", "violation", "error", "not loaded"]


class MutantReply(TypedDict):
    ok: Literal[True]
    outcome: MutantOutcomeKind
    checks: NotRequired[list[dict[str, Any]]]
    error: NotRequired[str]


class TimingReply(TypedDict):
    ok: Literal[True]
    dims: dict[str, int]
    reps: int
    gpu: str
    candidate_median_ms: float
    candidate_device_sync_median_ms: float
    baseline_median_ms: NotRequired[float]
    baseline_device_sync_median_ms: NotRequired[float]
    baseline_cached: NotRequired[
        bool
    ]  # the library's time was measured by this worker for an earlier candidate
    recheck: list[dict[str, Any]]


def encode(message: Command | dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def parse_command(line: str) -> Command:
    """A command line from the parent; ValueError on anything that is not one."""
    obj = json.loads(line)
    if not isinstance(obj, dict) or obj.get("cmd") not in COMMANDS:
        raise ValueError(f"not a worker command: {line[:200]!r}")
    return obj  # type: ignore[return-value]
