"""Typed rows of the bench database: one per episode, one per round, derived from an EpisodeResult.

An episode's stage flags are those of its best round (the agent ranks success first, then the number of
stages passed, so the best round went furthest). Without a GPU the correctness, execution and timing stages
are skipped: ``correct``/``executed``/``success`` are then False and ``unverified`` is True; they were not
failed, and reports say so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ptxrag.agent_graph import EpisodeResult, RoundRecord

from .failures import failure_of
from .study import Episode

EpisodeStatus = Literal["pending", "running", "done", "interrupted", "error"]
FINISHED_STOPS = ("solved", "round_limit", "unverified_no_gpu")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RoundRow(_Frozen):
    episode_id: str
    round: int
    outcome: str
    failure_stage: str | None = Field(None, description="no_code, or the first stage that failed")
    failure_reason: str | None = Field(None, description="normalized, so equal mistakes group")
    compiled: bool
    static_ok: bool = Field(description="compiled, and every target instruction is in the SASS")
    correct: bool
    executed: bool = Field(description="every target instruction's predicated-on thread count > 0")
    success: bool
    unverified: bool = Field(description="every stage that ran passed; the GPU stages did not run")
    speedup: float | None = Field(None, description="baseline time / candidate time")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    model_wall_s: float = 0.0
    eval_wall_s: float = 0.0
    code: str | None = None
    reply: str = ""
    feedback: str = Field("", description="what the evaluator told the model about this attempt")
    report_json: str | None = None


class EpisodeRow(_Frozen):
    episode_id: str
    task_id: str
    family: str
    level: int
    model: str
    condition: str = Field(description="the condition's name")
    condition_spec: str = Field(description="built-in name or absolute .toml path")
    sample: int
    status: EpisodeStatus
    stop_reason: str | None = None
    error: str | None = None
    max_rounds: int
    rounds_used: int = 0
    best_round: int | None = None
    first_static_round: int | None = None
    solved_round: int | None = None
    compiled: bool = False
    static_ok: bool = False
    correct: bool = False
    executed: bool = False
    success: bool = False
    unverified: bool = False
    speedup: float | None = Field(None, description="of the solved round; None unless success was timed")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: float | None = None
    wall_s: float = 0.0
    attempts: int = 0
    resumed: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    transcript_md: str | None = Field(None, description="relative to the bench folder")
    transcript_jsonl: str | None = None


def round_row(episode_id: str, r: RoundRecord) -> RoundRow:
    rep = r.report
    stage, reason = failure_of(rep, r.extraction_error)
    feedback = rep.feedback() if rep is not None else f"no code: {r.extraction_error or ''}"
    return RoundRow(
        episode_id=episode_id,
        round=r.round,
        outcome=r.outcome,
        failure_stage=stage,
        failure_reason=reason,
        compiled=bool(rep and rep.compile.ok),
        static_ok=bool(rep and rep.compile.ok and rep.static.ok),
        correct=bool(rep and rep.correctness.ok),
        executed=bool(rep and rep.execution.ok),
        success=bool(rep and rep.success),
        unverified=bool(rep and not rep.success and rep.first_failure is None),
        speedup=rep.timing.speedup if rep is not None else None,
        input_tokens=r.usage.input_tokens,
        output_tokens=r.usage.output_tokens,
        cache_read_tokens=r.usage.cache_read_tokens,
        cache_creation_tokens=r.usage.cache_creation_tokens,
        model_wall_s=r.model_wall_s,
        eval_wall_s=r.eval_wall_s,
        code=r.code,
        reply=r.reply,
        feedback=feedback,
        report_json=rep.model_dump_json() if rep is not None else None,
    )


def episode_base(ep: Episode, status: EpisodeStatus = "pending") -> EpisodeRow:
    """The row of an episode that has not finished (nothing measured yet)."""
    return EpisodeRow(
        episode_id=ep.episode_id,
        task_id=ep.task.id,
        family=ep.task.family,
        level=ep.task.level,
        model=ep.key.model,
        condition=ep.condition_name,
        condition_spec=ep.key.condition,
        sample=ep.key.sample,
        status=status,
        max_rounds=ep.max_rounds,
    )


def _first(rows: list[RoundRow], attr: str) -> int | None:
    return next((r.round for r in rows if getattr(r, attr)), None)


def episode_row(
    base: EpisodeRow,
    result: EpisodeResult,
    rounds: list[RoundRow],
    *,
    cost_usd: float | None,
    transcript_md: str,
    transcript_jsonl: str,
) -> EpisodeRow:
    """The finished (or interrupted) episode's row: ``base`` filled in from ``result``."""
    best = next((r for r in rounds if r.round == result.best_round), None)
    success = bool(best and best.success)
    status: EpisodeStatus = "done" if result.stop_reason in FINISHED_STOPS else "interrupted"
    u = result.usage
    return base.model_copy(
        update={
            "status": status,
            "stop_reason": result.stop_reason,
            "error": result.error,
            "max_rounds": result.max_rounds,
            "rounds_used": len(rounds),
            "best_round": result.best_round,
            "first_static_round": _first(rounds, "static_ok"),
            "solved_round": _first(rounds, "success"),
            "compiled": bool(best and best.compiled),
            "static_ok": bool(best and best.static_ok),
            "correct": bool(best and best.correct),
            "executed": bool(best and best.executed),
            "success": success,
            "unverified": result.stop_reason == "unverified_no_gpu",
            "speedup": best.speedup if (success and best is not None) else None,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_creation_tokens": u.cache_creation_tokens,
            "cost_usd": cost_usd,
            "wall_s": base.wall_s + result.wall_s,
            "resumed": result.resumed or base.resumed,
            "transcript_md": transcript_md,
            "transcript_jsonl": transcript_jsonl,
        }
    )
