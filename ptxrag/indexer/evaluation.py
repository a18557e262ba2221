"""Retrieval quality: recall@1/5/10 and MRR@10 of a query file (JSON lines ``{"query": ..., "expect":
["9.7.13.15.16", ...]}``; a query counts as found at the best rank of any expected section)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import IndexerError
from .schema import MANUAL_SOURCE, Hit


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class EvalQuery(_Frozen):
    query: str = Field(min_length=1)
    expect: list[str] = Field(min_length=1)
    kind: str | None = None


class QueryOutcome(_Frozen):
    query: str
    expect: list[str]
    kind: str | None = None
    rank: int | None = Field(
        description="1-based rank of the first expected section in the top 10; None if absent"
    )
    top: list[str] = Field(description="section numbers returned, best first")
    elapsed_ms: float


class RetrievalEval(_Frozen):
    file: str
    version: str | None
    queries: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    median_query_ms: float
    outcomes: list[QueryOutcome]

    @property
    def misses(self) -> list[QueryOutcome]:
        """Queries whose expected section was not ranked first."""
        return [o for o in self.outcomes if o.rank != 1]


class _Searcher(Protocol):
    def search(
        self, query: str, k: int = 5, *, version: str | None = None, sources: list[str] | None = None
    ) -> list[Hit]: ...


def load_queries(path: Path) -> list[EvalQuery]:
    if not path.is_file():
        raise IndexerError(f"{path}: no such query file")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append(EvalQuery.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as e:
            raise IndexerError(
                f'{path}:{n}: expected {{"query": "...", "expect": ["9.7.13.15.16"]}}, got {line[:80]!r} ({e})'
            ) from e
    if not out:
        raise IndexerError(f"{path}: no queries")
    return out


def evaluate(
    retriever: _Searcher,
    queries: Sequence[EvalQuery],
    *,
    file: str = "",
    version: str | None = None,
    sources: list[str] | None = None,
) -> RetrievalEval:
    """Run every query (top 10, manual only unless ``sources`` says otherwise) and score the ranks."""
    srcs = sources or [MANUAL_SOURCE]
    outcomes = []
    for q in queries:
        t0 = time.perf_counter()
        hits = retriever.search(q.query, 10, version=version, sources=srcs)
        ms = (time.perf_counter() - t0) * 1000
        top = [h.section_number for h in hits]
        rank = next((i for i, n in enumerate(top, start=1) if n in q.expect), None)
        outcomes.append(
            QueryOutcome(query=q.query, expect=q.expect, kind=q.kind, rank=rank, top=top, elapsed_ms=ms)
        )
    n = len(outcomes)

    def recall(k: int) -> float:
        return sum(1 for o in outcomes if o.rank is not None and o.rank <= k) / n

    return RetrievalEval(
        file=file,
        version=version,
        queries=n,
        recall_at_1=recall(1),
        recall_at_5=recall(5),
        recall_at_10=recall(10),
        mrr_at_10=sum(1.0 / o.rank for o in outcomes if o.rank is not None) / n,
        median_query_ms=statistics.median(o.elapsed_ms for o in outcomes),
        outcomes=outcomes,
    )
