"""``run_task``: one episode of the agent on one task, durable and resumable.

The graph is checkpointed in SQLite after every node; an episode killed mid-way resumes at its last
completed step when ``run_task`` is called again with the same ``episode_id`` (the model is not asked
again for a reply it already gave). Transcripts are rewritten after every round.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field

from ptxrag.base.errors import ConfigInputError
from ptxrag.sandbox.protocol import Evaluator
from ptxrag.tasks import TaskSpec, load_task

from .conditions import Condition, load_condition
from .graph import build_graph, sqlite_checkpointer
from .knowledge import CorpusKnowledge, KnowledgeProvider, KnowledgeUnavailable
from .models import ChatModel, ModelCallError, RetryPolicy, as_chat_model
from .nodes import AgentDeps, SandboxError
from .replay import message_text
from .retrieval import DocsRetriever, RetrievalUnavailable, default_retriever
from .state import ContextBlock, RoundRecord, StopReason, TokenUsage
from .tokens import TOKENIZER
from .transcript import render_markdown, write_jsonl, write_markdown

EpisodeStop = StopReason | Literal["model_error", "sandbox_error", "knowledge_error"]
_HARNESS_ERRORS: dict[type[Exception], str] = {
    ModelCallError: "model_error",
    SandboxError: "sandbox_error",
    KnowledgeUnavailable: "knowledge_error",
    RetrievalUnavailable: "knowledge_error",
}


class EpisodeMismatch(ConfigInputError, ValueError):
    """An existing episode id was resumed with a different task, condition or model."""


class AgentEvent(BaseModel):
    """Progress of a running episode: a stage starting, or a round finished."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["stage", "round", "stop"]
    round: int = 0
    stage: str = ""
    outcome: str = ""
    success: bool = False


class EpisodeResult(BaseModel):
    """What one episode did, and where its records are."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    episode_id: str
    task_id: str
    condition: Condition
    model: str
    stop_reason: EpisodeStop
    error: str | None = Field(None, description="the harness failure that interrupted the episode")
    rounds: list[RoundRecord]
    best_round: int | None
    static_context: ContextBlock | None
    max_rounds: int
    budget_tokens: int
    tokenizer: str = TOKENIZER
    usage: TokenUsage
    transcript_jsonl: str
    transcript_md: str
    checkpoint_db: str
    resumed: bool = Field(False, description="this call continued an episode that had already started")
    wall_s: float = 0.0

    @property
    def best(self) -> RoundRecord | None:
        return next((r for r in self.rounds if r.round == self.best_round), None)

    @property
    def success(self) -> bool:
        return self.stop_reason == "solved"

    @property
    def interrupted(self) -> bool:
        """A harness failure stopped it; calling run_task again with the same episode_id resumes it."""
        return self.stop_reason in ("model_error", "sandbox_error", "knowledge_error")


def make_sandbox(spec: Evaluator | str | None = None) -> Evaluator:
    """``None``/``"local"``: the local sandbox; ``http(s)://...``: the sandbox service at that URL."""
    if spec is None or spec == "local":
        from ptxrag.sandbox import Sandbox

        return Sandbox()
    if isinstance(spec, str):
        if not spec.startswith(("http://", "https://")):
            raise ValueError(f"--sandbox must be 'local' or an http(s):// URL, not {spec!r}")
        from ptxrag.sandbox import Sandbox

        # the sandbox service client: same typed reports; its token comes from PTXRAG_SERVICE_TOKEN
        return Sandbox(url=spec)
    return spec


def _slug(text: str, limit: int = 200) -> str:
    return re.sub(r"[^A-Za-z0-9+.-]+", "-", text).strip("-")[:limit] or "x"


def new_episode_id(task_id: str, condition: str, model: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    model_name = Path(model.split(":", 1)[-1]).name if model.startswith("replay:") else model
    return f"{task_id}.{_slug(condition, 40)}.{_slug(model_name, 40)}.{stamp}"


def default_runs_dir() -> Path:
    from ptxrag.base.paths import home

    return home() / "runs"


def run_task(
    task: str | TaskSpec,
    *,
    model: str | BaseChatModel | ChatModel,
    condition: str | Path | Condition = "rag+templates",
    max_rounds: int = 8,
    sandbox: Evaluator | str | None = None,
    retriever: DocsRetriever | None = None,
    knowledge: KnowledgeProvider | None = None,
    budget_tokens: int | None = None,
    episode_id: str | None = None,
    runs_dir: Path | None = None,
    on_event: Callable[[AgentEvent], None] | None = None,
    retry: RetryPolicy | None = None,
) -> EpisodeResult:
    """Run (or resume) one episode. Harness failures end it with ``interrupted`` set and the error kept;
    calling again with the same ``episode_id`` resumes it. Bad arguments raise before anything runs."""
    t0 = time.monotonic()
    spec = load_task(task) if isinstance(task, str) else task
    cond = condition if isinstance(condition, Condition) else load_condition(condition)
    if budget_tokens is not None:
        cond = cond.with_budget(budget_tokens)
    if not 1 <= max_rounds <= 50:
        raise ValueError(f"max_rounds must be between 1 and 50, not {max_rounds}")
    chat = as_chat_model(model, retry)
    if cond.retrieval.enabled and retriever is None:
        retriever = default_retriever()
    deps = AgentDeps(
        task=spec,
        model=chat,
        sandbox=make_sandbox(sandbox),
        knowledge=knowledge or CorpusKnowledge(),
        retriever=retriever,
    )
    runs = Path(runs_dir) if runs_dir is not None else default_runs_dir()
    eid = episode_id or new_episode_id(spec.id, cond.name, chat.label)
    folder = runs / _slug(eid)
    folder.mkdir(parents=True, exist_ok=True)
    db = runs / "checkpoints.sqlite"
    emit = on_event or (lambda _e: None)
    with sqlite_checkpointer(db) as saver:
        graph = build_graph(saver)
        config: dict[str, Any] = {"configurable": {"thread_id": eid}, "recursion_limit": 5 * max_rounds + 10}
        snap = graph.get_state(config)
        resumed = bool(snap.values)
        inp: dict[str, Any] | None
        if resumed:
            _check_same(eid, snap.values, spec.id, cond, chat.label)
            inp = None
        else:
            inp = {
                "task_id": spec.id,
                "condition": cond,
                "model_label": chat.label,
                "max_rounds": max_rounds,
                "rounds": [],
                "shown": [],
            }
        stop: str | None = None
        error: str | None = None
        rounds_cap = int((snap.values or inp or {}).get("max_rounds", max_rounds))
        header = _header(eid, spec.id, cond, chat.label, rounds_cap)
        if not resumed or snap.next:
            try:
                for mode, chunk in graph.stream(
                    inp,
                    config,
                    context=deps,
                    stream_mode=["updates", "custom"],
                    durability="sync",  # a step is on disk before the next one starts
                ):
                    if mode == "custom":
                        emit(AgentEvent(**chunk))
                    elif "evaluate" in chunk:
                        _write(folder, header, graph.get_state(config).values, None)
            except tuple(_HARNESS_ERRORS) as e:
                stop = next(v for k, v in _HARNESS_ERRORS.items() if isinstance(e, k))
                error = str(e)
        values = graph.get_state(config).values
    stop = stop or values.get("stop_reason")
    if stop is None:
        raise RuntimeError(f"episode {eid} ended without a stop reason (state: round {values.get('round')})")
    rounds: list[RoundRecord] = list(values.get("rounds", []))
    usage = TokenUsage()
    for r in rounds:
        usage = usage + r.usage
    result = EpisodeResult(
        episode_id=eid,
        task_id=spec.id,
        condition=values.get("condition", cond),
        model=values.get("model_label", chat.label),
        stop_reason=stop,  # type: ignore[arg-type]
        error=error,
        rounds=rounds,
        best_round=values.get("best_round"),
        static_context=values.get("static_context"),
        max_rounds=values.get("max_rounds", max_rounds),
        budget_tokens=values.get("condition", cond).budget_tokens,
        usage=usage,
        transcript_jsonl=str(folder / "transcript.jsonl"),
        transcript_md=str(folder / "transcript.md"),
        checkpoint_db=str(db),
        resumed=resumed,
        wall_s=time.monotonic() - t0,
    )
    _write(folder, header, values, result)
    emit(AgentEvent(kind="stop", round=len(rounds), outcome=stop, success=result.success))
    return result


def _check_same(eid: str, values: dict[str, Any], task_id: str, cond: Condition, model: str) -> None:
    old = values.get("condition")
    mismatches = []
    if values.get("task_id") != task_id:
        mismatches.append(f"task {values.get('task_id')!r} (now {task_id!r})")
    if old is not None and old.model_dump(exclude={"source_file"}) != cond.model_dump(
        exclude={"source_file"}
    ):
        mismatches.append(f"condition {old.name!r} as it was then (now {cond.name!r})")
    if values.get("model_label") != model:
        mismatches.append(f"model {values.get('model_label')!r} (now {model!r})")
    if mismatches:
        raise EpisodeMismatch(
            f"episode {eid} was started with " + ", ".join(mismatches) + "; use a new episode id"
        )


def _header(eid: str, task_id: str, cond: Condition, model: str, max_rounds: int) -> dict[str, Any]:
    return {
        "episode_id": eid,
        "task_id": task_id,
        "condition": cond.name,
        "condition_spec": cond.model_dump(mode="json"),
        "model": model,
        "budget_tokens": cond.budget_tokens,
        "tokenizer": TOKENIZER,
        "max_rounds": max_rounds,
    }


def _write(
    folder: Path, header: dict[str, Any], values: dict[str, Any], result: EpisodeResult | None
) -> None:
    rounds = list(values.get("rounds", []))
    msgs = values.get("messages", [])
    system = message_text(msgs[0]) if msgs else ""
    summary = None
    if result is not None:
        summary = result.model_dump(
            mode="json", include={"stop_reason", "error", "best_round", "usage", "resumed", "wall_s"}
        )
    write_jsonl(folder / "transcript.jsonl", header, rounds, summary)
    write_markdown(
        folder / "transcript.md",
        render_markdown(header, values.get("static_context"), system, rounds, summary),
    )
