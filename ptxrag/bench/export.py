"""``export_fixit``: fine-tuning pairs from a bench folder, the study's "A-Fixit" format.

One JSON line per failed attempt that the same episode later fixed: the failed code, the evaluator's
feedback on it, the code that then passed, and the model's explanation of that fix (its reply without the
code). By default only fixes that passed every stage on a GPU count; ``include_unverified`` also takes
attempts that passed every stage that ran where the GPU stages were skipped, marked ``verified: false``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .records import RoundRow
from .store import BenchStore

FORMAT: Literal["a-fixit/1"] = "a-fixit/1"
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$\n?", re.S | re.M)


class FixitRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["a-fixit/1"] = FORMAT
    episode_id: str
    task_id: str
    family: str
    level: int
    model: str
    condition: str
    sample: int
    task_statement: str = Field(description="the task as the model was given it ('' if the task is gone)")
    required_ptx: list[str] = Field(default_factory=list)
    failed_round: int
    failed_code: str
    failure_stage: str
    feedback: str = Field(description="the evaluator's verdict on the failed attempt, as the model saw it")
    fixed_round: int
    fixed_code: str
    explanation: str = Field(description="the model's reply with the fixed code, code blocks removed")
    verified: bool = Field(description="the fix passed the GPU stages (False: only compile and static ran)")


class ExportSummary(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    records: int
    episodes: int = Field(description="episodes that contributed at least one pair")
    unverified_fixes_skipped: int = Field(description="episodes whose only fix never ran on a GPU")


def explanation_of(reply: str) -> str:
    """The prose of a reply: every fenced code block removed, blank runs collapsed."""
    text = _FENCE.sub("", reply)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _fixed_round(rounds: list[RoundRow], include_unverified: bool) -> RoundRow | None:
    return next((r for r in rounds if r.code and (r.success or (include_unverified and r.unverified))), None)


def _task_info(task_id: str, cache: dict[str, tuple[str, list[str]]]) -> tuple[str, list[str]]:
    if task_id not in cache:
        from ptxrag.tasks import TaskError, load_task

        try:
            t = load_task(task_id)
            cache[task_id] = (t.statement.strip(), list(t.required_ptx))
        except TaskError:
            cache[task_id] = ("", [])
    return cache[task_id]


def fixit_records(out: Path | str, *, include_unverified: bool = False) -> tuple[list[FixitRecord], int]:
    """The pairs in a bench folder, and how many episodes were skipped because their fix was unverified."""
    records: list[FixitRecord] = []
    skipped = 0
    tasks: dict[str, tuple[str, list[str]]] = {}
    with BenchStore(Path(out).expanduser(), create=False) as store:
        for ep in store.episodes():
            if ep.status != "done":
                continue
            rounds = store.rounds(ep.episode_id)
            fixed = _fixed_round(rounds, include_unverified)
            if fixed is None:
                skipped += int(_fixed_round(rounds, True) is not None)
                continue
            statement, ptx = _task_info(ep.task_id, tasks)
            for r in rounds:
                if r.round >= fixed.round or not r.code or r.failure_stage is None:
                    continue
                records.append(
                    FixitRecord(
                        episode_id=ep.episode_id, task_id=ep.task_id, family=ep.family, level=ep.level,
                        model=ep.model, condition=ep.condition, sample=ep.sample,
                        task_statement=statement, required_ptx=ptx,
                        failed_round=r.round, failed_code=r.code, failure_stage=r.failure_stage,
                        feedback=r.feedback, fixed_round=fixed.round, fixed_code=fixed.code or "",
                        explanation=explanation_of(fixed.reply), verified=fixed.success,
                    )
                )  # fmt: skip
    return records, skipped


def export_fixit(
    out: Path | str, dest: Path | str | None = None, *, include_unverified: bool = False
) -> ExportSummary:
    """Write the pairs as JSON lines to ``dest`` (default ``OUT/fixit.jsonl``), replacing it atomically."""
    records, skipped = fixit_records(out, include_unverified=include_unverified)
    path = Path(dest).expanduser() if dest is not None else Path(out).expanduser() / "fixit.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        for rec in records:
            f.write(rec.model_dump_json() + "\n")
    os.replace(tmp, path)
    return ExportSummary(
        path=str(path),
        records=len(records),
        episodes=len({r.episode_id for r in records}),
        unverified_fixes_skipped=skipped,
    )
