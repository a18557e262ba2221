"""``run_bench``: run a study (tasks x models x conditions x samples) into a bench folder, resumably.

The folder holds ``bench.sqlite`` (one row per episode and per round) and ``episodes/<id>/`` (each
episode's checkpoint database and transcripts). Running the same study again skips finished episodes and
resumes the others where they stopped: episode ids are deterministic, and each episode is checkpointed
after every step of the agent graph.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ptxrag.agent_graph import (
    AgentEvent,
    DocsRetriever,
    EpisodeResult,
    RetrievalUnavailable,
    default_retriever,
)
from ptxrag.sandbox.protocol import Evaluator

from .executors import Executor, make_executor, needs_retrieval
from .executors.base import RunContext
from .prices import PriceTable, load_prices
from .records import episode_base, episode_row, round_row
from .store import BenchStore
from .study import BenchConfigError, BenchSpec, Episode, model_label, resolve

LOCK_NAME = "bench.lock"


class BenchEvent(BaseModel):
    """Progress of a bench: the plan, then episodes starting, rounds finishing and episodes ending."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["plan", "episode_started", "round", "episode_finished", "episode_failed"]
    episode_id: str = ""
    task_id: str = ""
    model: str = ""
    condition: str = ""
    sample: int = 0
    round: int = 0
    outcome: str = ""
    status: str = ""
    success: bool = False
    total: int = Field(0, description="episodes in the study")
    already_done: int = Field(0, description="episodes finished by an earlier run (skipped)")
    to_run: int = Field(0, description="episodes this run starts or resumes")


class BenchSummary(BaseModel):
    """What a run left in the bench folder."""

    model_config = ConfigDict(frozen=True)
    out: str
    database: str
    executor: str
    total: int
    already_done: int
    ran: int
    done: int
    interrupted: int
    error: int
    pending: int
    solved: int
    unverified: int
    wall_s: float

    @property
    def complete(self) -> bool:
        return self.done == self.total


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One bench at a time per folder (two would run the same episodes twice)."""
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchConfigError(
                f"another ptxrag bench is running on {out}; wait for it, or use another --out"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _budget_setting(spec: BenchSpec) -> str:
    if spec.budgets:
        return "axis " + ",".join(str(b) for b in spec.budgets)
    return str(spec.budget_tokens or "per condition")


def _history_setting(spec: BenchSpec) -> str:
    if spec.history_is_axis:
        return "axis " + ",".join(spec.history or [])
    return spec.history[0] if spec.history else "per condition"


def _relative(path: str, out: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(out))
    except ValueError:
        return path


def run_bench(
    spec: BenchSpec,
    out: Path | str,
    *,
    executor: str | Executor = "local",
    workers: int = 4,
    gpu_shared: int = 1,
    sandbox: Evaluator | str = "local",
    retriever: DocsRetriever | None = None,
    prices: PriceTable | None = None,
    ray_address: str | None = None,
    ray_num_cpus: int | None = None,
    on_event: Callable[[BenchEvent], None] | None = None,
) -> BenchSummary:
    """Run (or continue) a study into ``out``. Bad settings raise BenchConfigError before anything runs;
    an episode that fails is recorded (status ``interrupted`` or ``error``) and retried by the next run."""
    t0 = time.monotonic()
    episodes = resolve(spec)
    out = Path(out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    prices = prices or load_prices()
    emit = on_event or (lambda _e: None)
    if isinstance(executor, str):
        opts: dict[str, object] = {"workers": workers}
        if executor == "ray":
            opts.update(address=ray_address, num_cpus=ray_num_cpus)
        else:
            opts.update(gpu_shared=gpu_shared)
        executor = make_executor(executor, **opts)
    with _exclusive(out), BenchStore(out) as store:
        store.check_settings(
            {
                "max_rounds": str(spec.max_rounds),
                "budget_tokens": _budget_setting(spec),
                "history": _history_setting(spec),
            }
        )
        store.add_pending([episode_base(ep) for ep in episodes])
        status = {e.episode_id: e.status for e in store.episodes()}
        todo = [ep for ep in episodes if status.get(ep.episode_id) != "done"]
        already = len(episodes) - len(todo)
        if todo and retriever is None and needs_retrieval(todo):
            try:
                retriever = default_retriever()
            except RetrievalUnavailable as e:
                raise BenchConfigError(f"a condition retrieves, but: {e}") from None
        emit(BenchEvent(kind="plan", total=len(episodes), already_done=already, to_run=len(todo)))

        def ev(ep: Episode, kind: str, **kw: object) -> BenchEvent:
            return BenchEvent(
                kind=kind,  # type: ignore[arg-type]
                episode_id=ep.episode_id,
                task_id=ep.task.id,
                model=model_label(ep.key.model),
                condition=ep.condition_name,
                sample=ep.key.sample,
                total=len(episodes),
                **kw,  # type: ignore[arg-type]
            )

        def started(ep: Episode) -> None:
            store.mark_running(ep.episode_id)
            emit(ev(ep, "episode_started"))

        def finished(ep: Episode, result: EpisodeResult) -> None:
            base = store.episode(ep.episode_id) or episode_base(ep, "running")
            rounds = [round_row(ep.episode_id, r) for r in result.rounds]
            row = episode_row(
                base,
                result,
                rounds,
                cost_usd=prices.cost_usd(ep.key.model, result.usage),
                transcript_md=_relative(result.transcript_md, out),
                transcript_jsonl=_relative(result.transcript_jsonl, out),
            )
            store.finish(row, rounds)
            emit(ev(ep, "episode_finished", status=row.status, outcome=result.stop_reason,
                    success=row.success, round=row.rounds_used))  # fmt: skip

        def failed(ep: Episode, exc: BaseException) -> None:
            store.mark_error(ep.episode_id, f"{type(exc).__name__}: {exc}")
            emit(ev(ep, "episode_failed", status="error", outcome=f"{type(exc).__name__}: {exc}"))

        def event(ep: Episode, e: AgentEvent) -> None:
            if e.kind == "round":
                emit(ev(ep, "round", round=e.round, outcome=e.outcome, success=e.success))

        ctx = RunContext(
            out=out, sandbox=sandbox, retriever=retriever,
            started=started, finished=finished, failed=failed, event=event,
        )  # fmt: skip
        executor.run(todo, ctx)
        rows = [e for e in store.episodes() if e.episode_id in {ep.episode_id for ep in episodes}]
    counts = {
        s: sum(1 for r in rows if r.status == s)
        for s in ("done", "interrupted", "error", "pending", "running")
    }
    return BenchSummary(
        out=str(out),
        database=str(store.path),
        executor=executor.name,
        total=len(episodes),
        already_done=already,
        ran=len(todo),
        done=counts["done"],
        interrupted=counts["interrupted"],
        error=counts["error"],
        pending=counts["pending"] + counts["running"],
        solved=sum(1 for r in rows if r.success),
        unverified=sum(1 for r in rows if r.unverified),
        wall_s=time.monotonic() - t0,
    )
