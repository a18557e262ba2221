"""The graph's nodes: small ``(state, runtime) -> partial update`` functions, and the router.

Failures the model caused (no code, compile error, wrong output, an instruction never executed) become
data in the round record and the next prompt. Failures of the harness (model API down, sandbox broken,
knowledge missing) raise, leaving the checkpoint at the last completed node so the episode can resume.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ptxrag.base.errors import SandboxFailure
from ptxrag.sandbox import EvaluationReport
from ptxrag.sandbox.protocol import Evaluator
from ptxrag.tasks import TaskSpec

from .extract import NoCodeFound, extract_code
from .knowledge import CorpusKnowledge, KnowledgeProvider, build_static_context
from .models import ChatModel, usage_of
from .prompts import feedback_prompt, system_prompt, task_prompt
from .queries import round_queries
from .replay import message_text
from .retrieval import DocsRetriever, RetrievalUnavailable, retrieve_context
from .state import AgentState, RoundDraft, RoundRecord


class SandboxError(SandboxFailure, RuntimeError):
    """The sandbox itself failed (toolchain missing, a stage reported ``error``): not the model's fault."""


@dataclass
class AgentDeps:
    """Run-scoped dependencies, given to every node (the one override point for tests and other harnesses)."""

    task: TaskSpec
    model: ChatModel
    sandbox: Evaluator
    knowledge: KnowledgeProvider = field(default_factory=CorpusKnowledge)
    retriever: DocsRetriever | None = None


def _emit(runtime: Runtime[AgentDeps], **event: Any) -> None:
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer(event)


def prepare(state: AgentState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    """Static context for the condition, and the system prompt that carries it."""
    deps = runtime.context
    if state.get("task_id") != deps.task.id:
        raise ValueError(
            f"state is for task {state.get('task_id')!r} but the runtime task is {deps.task.id!r}"
        )
    _emit(runtime, kind="stage", round=0, stage="prepare")
    static = build_static_context(state["condition"], deps.task, deps.knowledge)
    return {
        "static_context": static,
        "messages": [SystemMessage(content=system_prompt(static))],
        "round": 0,
        "draft": None,
        "best_round": None,
        "stop_reason": None,
    }


def retrieve(state: AgentState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    """This round's queries and the new sections they find (nothing, for conditions without retrieval)."""
    deps = runtime.context
    cond = state["condition"]
    k = state["round"] + 1
    if not cond.retrieval.enabled:
        return {"draft": RoundDraft(round=k)}
    if deps.retriever is None:
        raise RetrievalUnavailable(f"condition {cond.name!r} retrieves, but no retriever was given")
    _emit(runtime, kind="stage", round=k, stage="retrieve")
    rounds = state.get("rounds", [])
    queries = round_queries(deps.task, rounds[-1] if rounds else None, cond.retrieval.max_queries)
    block = retrieve_context(cond, deps.task, queries, deps.retriever, state.get("shown", []))
    return {"draft": RoundDraft(round=k, queries=queries, retrieved=block), "shown": block.sections}


def generate(state: AgentState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    """Ask the model for one kernel; extract the .cu from its reply."""
    deps = runtime.context
    draft = state.get("draft")
    if draft is None or draft.round != state["round"] + 1:
        raise RuntimeError(f"generate: no draft for round {state['round'] + 1} (draft: {draft!r})")
    _emit(runtime, kind="stage", round=draft.round, stage="generate")
    rounds = state.get("rounds", [])
    if draft.round == 1:
        prompt = task_prompt(deps.task, draft.retrieved)
    else:
        prompt = feedback_prompt(rounds[-1], draft.retrieved)
    human = HumanMessage(content=prompt)
    t0 = time.monotonic()
    reply = deps.model.invoke([*state["messages"], human])
    wall = time.monotonic() - t0
    text = message_text(reply)
    try:
        ex = extract_code(text)
        code, notes, error = ex.code, ex.notes, None
    except NoCodeFound as e:
        code, notes, error = None, [], str(e)
    update = {
        "prompt": prompt,
        "reply": text,
        "code": code,
        "extraction_notes": notes,
        "extraction_error": error,
        "usage": usage_of(reply),
        "model_wall_s": wall,
    }
    return {"messages": [human, reply], "draft": draft.model_copy(update=update)}


def outcome_of(report: EvaluationReport | None, extraction_error: str | None) -> str:
    if report is None:
        return f"no code: {extraction_error}"
    if report.success:
        return "success"
    f = report.first_failure
    if f is None:
        gpu = next((s.message for s in report.stages() if s.status == "skipped" and "GPU" in s.message), "")
        return f"compile and static checks passed; GPU stages not run ({gpu or 'skipped'})"
    return f"{f.stage} {f.status}: {f.message.splitlines()[0][:160] if f.message else ''}"


def evaluate(state: AgentState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    """Run the extracted kernel through the sandbox and close the round."""
    deps = runtime.context
    draft = state.get("draft")
    if draft is None or (draft.code is None and draft.extraction_error is None):
        raise RuntimeError("evaluate: the round has no model reply")
    report: EvaluationReport | None = None
    t0 = time.monotonic()
    if draft.code is not None:
        _emit(runtime, kind="stage", round=draft.round, stage="evaluate")
        try:
            report = deps.sandbox.evaluate(deps.task, draft.code)
        except Exception as e:  # noqa: BLE001 - whatever broke, it is the harness, not the candidate
            raise SandboxError(f"the sandbox failed in round {draft.round}: {type(e).__name__}: {e}") from e
        broken = [s for s in report.stages() if s.status == "error"]
        if broken:
            raise SandboxError(
                f"the sandbox reported a harness error in round {draft.round}: "
                + "; ".join(f"[{s.stage}] {s.message}" for s in broken)
            )
    static = state.get("static_context")
    record = RoundRecord(
        **draft.model_dump(exclude={"round", "queries", "retrieved", "usage"}),
        round=draft.round,
        queries=draft.queries,
        retrieved=draft.retrieved,
        usage=draft.usage,
        static_tokens=static.tokens if static else 0,
        retrieved_tokens=draft.retrieved.tokens if draft.retrieved else 0,
        report=report,
        outcome=outcome_of(report, draft.extraction_error),
        eval_wall_s=time.monotonic() - t0,
    )
    _emit(
        runtime,
        kind="round",
        round=draft.round,
        stage="evaluate",
        outcome=record.outcome,
        success=record.success,
    )
    return {"rounds": [record], "round": draft.round, "draft": None}


def best_round(rounds: list[RoundRecord]) -> int | None:
    """Success first, then most stages passed, then speedup; the later round wins a tie."""
    if not rounds:
        return None

    def key(r: RoundRecord) -> tuple[bool, int, float, int]:
        speed = r.report.timing.speedup if r.report and r.report.timing.speedup else 0.0
        return (r.success, r.stages_passed, speed, r.round)

    return max(rounds, key=key).round


def route(state: AgentState) -> dict[str, Any]:
    """Decide whether the episode ends, and keep the best attempt."""
    rounds = state.get("rounds", [])
    if not rounds or rounds[-1].round != state["round"]:
        raise RuntimeError(f"route: round counter {state['round']} does not match the last record")
    last = rounds[-1]
    stop = None
    if last.success:
        stop = "solved"
    elif last.report is not None and last.report.first_failure is None:
        stop = "unverified_no_gpu"
    elif state["round"] >= state["max_rounds"]:
        stop = "round_limit"
    return {"stop_reason": stop, "best_round": best_round(rounds)}


def after_route(state: AgentState) -> Literal["retrieve", "__end__"]:
    stop = state.get("stop_reason")
    if stop is not None:
        return "__end__"
    if state["round"] >= state["max_rounds"]:
        raise RuntimeError(f"router: round {state['round']} reached the limit but no stop reason was set")
    return "retrieve"
