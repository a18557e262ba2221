"""What every executor shares: how one episode runs, and how it reports back to the runner."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ptxrag.agent_graph import AgentEvent, DocsRetriever, EpisodeResult, run_task
from ptxrag.sandbox.protocol import Evaluator

from ..study import Episode

if TYPE_CHECKING:
    from ptxrag.indexer import Hit


def episode_dir(out: Path, episode_id: str) -> Path:
    """Where one episode's checkpoint database and transcripts live (one database per episode: no lock
    contention between threads or Ray workers, and a damaged file costs one episode)."""
    return Path(out) / "episodes" / episode_id


def run_episode(
    ep: Episode,
    out: Path,
    *,
    sandbox: Evaluator | str,
    retriever: DocsRetriever | None,
    on_event: Callable[[AgentEvent], None] | None = None,
) -> EpisodeResult:
    """Run or resume one episode (its id is deterministic, so a second call continues the first)."""
    return run_task(
        ep.task,
        model=ep.model_spec,
        condition=ep.key.condition,
        max_rounds=ep.max_rounds,
        sandbox=sandbox,
        retriever=retriever,
        budget_tokens=ep.budget_tokens,
        history=ep.history,
        episode_id=ep.episode_id,
        runs_dir=episode_dir(out, ep.episode_id),
        on_event=on_event,
    )


def needs_retrieval(episodes: Sequence[Episode]) -> bool:
    from ptxrag.agent_graph import load_condition

    return any(load_condition(c).retrieval.enabled for c in {e.key.condition for e in episodes})


class LockedRetriever:
    """One retriever shared by episode threads, one search at a time (the index and the embedding model
    are not documented as thread-safe; a search is short next to a model call)."""

    def __init__(self, inner: DocsRetriever) -> None:
        self.inner = inner
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 5, **kwargs: Any) -> list[Hit]:
        with self._lock:
            return self.inner.search(query, k, **kwargs)

    def version_for_arch(self, arch: str) -> str:
        with self._lock:
            return self.inner.version_for_arch(arch)


@dataclass
class RunContext:
    """What the runner gives an executor: the bench folder, the sandbox, and callbacks that record
    progress (they may be called from worker threads; the runner's store is thread-safe)."""

    out: Path
    sandbox: Evaluator | str
    """``"local"``, a sandbox service URL, or an Evaluator object (local executor only)."""
    retriever: DocsRetriever | None
    """The retriever local episodes share (None when no condition retrieves); Ray workers open their own."""
    started: Callable[[Episode], None]
    finished: Callable[[Episode, EpisodeResult], None]
    failed: Callable[[Episode, BaseException], None]
    event: Callable[[Episode, AgentEvent], None]


class Executor(Protocol):
    name: str

    def run(self, episodes: Sequence[Episode], ctx: RunContext) -> None:
        """Run every episode, reporting each through ``ctx``; one episode's failure never stops the rest."""
        ...
