"""Retrieval quality: recall@1/5/10, MRR@10 and nDCG@10 of a query file (JSON lines ``{"query": ...,
"expect": ["9.7.13.15.16", ...]}``), optionally with ``category``, ``split`` (dev/test) and ``contract`` (a
knowledge-pack contract document the query also expects).

A hit is relevant when it is an expected section or one of its descendants (``9.7.13.15.16.2`` answers
``9.7.13.15.16``; ``9.7.13.15.160`` and the parent ``9.7.13.15`` do not): an agent that is shown the
subsection that holds the answer has been helped. A query counts as found at the best relevant rank;
``exact_rank`` keeps the old exact-number rank for comparison. nDCG@10 uses binary gains, each expected
section credited once (at its first relevant hit), ideal = all expected sections at the top.

Queries that name a ``contract`` are searched a second time over the manual and the contracts together;
``contract_recall_at_5`` is the share whose contract is in that top 5 and ``contract_manual_recall_at_5``
the share whose manual section still is (contracts must not crowd the manual out).

The packaged sets (``evalsets/ptx-isa-9.1.jsonl``, ``ptx-isa-9.0.jsonl``; built by
``eval/retrieval/build_evalset.py``) are split into dev (about 40%, tune on these) and test (report these)
by a hash of the query text."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import IndexerError
from .schema import MANUAL_SOURCE, Hit

Split = Literal["dev", "test", "all"]
#: versions with a packaged evaluation set
PACKAGED_SETS = ("9.1", "9.0")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class EvalQuery(_Frozen):
    query: str = Field(min_length=1)
    expect: list[str] = Field(min_length=1)
    kind: str | None = None
    category: str | None = None
    split: Literal["dev", "test"] | None = None
    contract: str | None = Field(None, description="knowledge-pack contract document the query expects")
    id: str | None = None

    @property
    def label(self) -> str | None:
        return self.category or self.kind


class QueryOutcome(_Frozen):
    query: str
    expect: list[str]
    kind: str | None = None
    rank: int | None = Field(
        description="1-based rank of the first expected section or descendant in the top 10; None if absent"
    )
    exact_rank: int | None = Field(
        default=None, description="1-based rank of the first exactly expected section number; None if absent"
    )
    ndcg_at_10: float = 0.0
    top: list[str] = Field(description="section numbers returned, best first")
    elapsed_ms: float
    cpu_ms: float = Field(
        0.0, description="process CPU time of the search (all threads), less load-dependent"
    )
    contract: str | None = None
    contract_rank: int | None = Field(
        default=None, description="rank of the expected contract in the manual + contracts top 5"
    )
    manual_rank_with_contracts: int | None = Field(
        default=None, description="rank of the expected section in the manual + contracts top 5"
    )


class CategoryScore(_Frozen):
    queries: int
    recall_at_1: float
    recall_at_5: float
    mrr_at_10: float


class RetrievalEval(_Frozen):
    file: str
    version: str | None
    queries: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    ndcg_at_10: float
    exact_recall_at_1: float
    median_query_ms: float
    p95_query_ms: float
    outcomes: list[QueryOutcome]
    median_cpu_ms: float = 0.0
    p95_cpu_ms: float = 0.0
    split: str = "all"
    label: str = Field("", description="which retriever or ablation produced these ranks")
    by_category: dict[str, CategoryScore] = Field(default_factory=dict)
    contract_queries: int = 0
    contract_recall_at_5: float | None = None
    contract_manual_recall_at_5: float | None = None

    @property
    def misses(self) -> list[QueryOutcome]:
        """Queries whose expected section was not ranked first."""
        return [o for o in self.outcomes if o.rank != 1]


class _Searcher(Protocol):
    def search(
        self, query: str, k: int = 5, *, version: str | None = None, sources: list[str] | None = None
    ) -> list[Hit]: ...


def answers(hit: str, expected: str) -> bool:
    """True when section number ``hit`` is ``expected`` or a descendant of it (dotted-number prefix)."""
    return hit == expected or hit.startswith(expected + ".")


def _first(top: Sequence[str], expect: Sequence[str], *, descendants: bool) -> int | None:
    for i, n in enumerate(top, start=1):
        if any(answers(n, e) if descendants else n == e for e in expect):
            return i
    return None


def ndcg(top: Sequence[str], expect: Sequence[str], k: int = 10) -> float:
    """Binary-gain nDCG@k; each expected section is credited once, at its first relevant hit."""
    credited: set[str] = set()
    dcg = 0.0
    for i, n in enumerate(top[:k], start=1):
        fresh = [e for e in expect if e not in credited and answers(n, e)]
        if fresh:
            credited.add(fresh[0])
            dcg += 1.0 / math.log2(i + 1)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(set(expect)), k) + 1))
    return dcg / ideal if ideal else 0.0


def _p95(xs: Sequence[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def packaged_set(version: str) -> Path:
    """The packaged evaluation set of manual ``version`` (``9.1`` or ``9.0``)."""
    if version not in PACKAGED_SETS:
        raise IndexerError(
            f"no packaged evaluation set for PTX ISA {version}; have {', '.join(PACKAGED_SETS)}"
        )
    return Path(str(resources.files("ptxrag.indexer") / "evalsets" / f"ptx-isa-{version}.jsonl"))


def select(queries: Sequence[EvalQuery], split: Split) -> list[EvalQuery]:
    """The queries of one split; a query without a split belongs to every split."""
    if split == "all":
        return list(queries)
    out = [q for q in queries if q.split in (None, split)]
    if not out:
        raise IndexerError(f"no queries in split {split!r}")
    return out


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
    split: str = "all",
    label: str = "",
    contracts: bool = True,
) -> RetrievalEval:
    """Run every query (top 10, manual only unless ``sources`` says otherwise) and score the ranks; then,
    with ``contracts``, the queries naming a contract again over the manual and the contracts."""
    srcs = sources or [MANUAL_SOURCE]
    outcomes = []
    for q in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        hits = retriever.search(q.query, 10, version=version, sources=srcs)
        ms, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        top = [h.section_number for h in hits]
        rank = _first(top, q.expect, descendants=True)
        exact = _first(top, q.expect, descendants=False)
        outcomes.append(
            QueryOutcome(
                query=q.query,
                expect=q.expect,
                kind=q.label,
                contract=q.contract,
                rank=rank,
                exact_rank=exact,
                ndcg_at_10=ndcg(top, q.expect),
                top=top,
                elapsed_ms=ms,
                cpu_ms=cpu,
            )
        )
    if contracts:
        outcomes = [_with_contract(retriever, o, version) if o.contract else o for o in outcomes]
    n = len(outcomes)

    def recall(k: int) -> float:
        return sum(1 for o in outcomes if o.rank is not None and o.rank <= k) / n

    with_contract = [o for o in outcomes if o.contract and contracts]
    cats: dict[str, list[QueryOutcome]] = {}
    for o in outcomes:
        cats.setdefault(o.kind or "-", []).append(o)
    return RetrievalEval(
        split=split,
        label=label,
        by_category={c: _category(os) for c, os in sorted(cats.items())},
        contract_queries=len(with_contract),
        contract_recall_at_5=_share(with_contract, "contract_rank", 5),
        contract_manual_recall_at_5=_share(with_contract, "manual_rank_with_contracts", 5),
        file=file,
        version=version,
        queries=n,
        recall_at_1=recall(1),
        recall_at_5=recall(5),
        recall_at_10=recall(10),
        mrr_at_10=sum(1.0 / o.rank for o in outcomes if o.rank is not None) / n,
        ndcg_at_10=sum(o.ndcg_at_10 for o in outcomes) / n,
        exact_recall_at_1=sum(1 for o in outcomes if o.exact_rank == 1) / n,
        median_query_ms=statistics.median(o.elapsed_ms for o in outcomes),
        p95_query_ms=_p95([o.elapsed_ms for o in outcomes]),
        median_cpu_ms=statistics.median(o.cpu_ms for o in outcomes),
        p95_cpu_ms=_p95([o.cpu_ms for o in outcomes]),
        outcomes=outcomes,
    )


def _share(outcomes: Sequence[QueryOutcome], attr: str, k: int) -> float | None:
    if not outcomes:
        return None
    return sum(1 for o in outcomes if (r := getattr(o, attr)) is not None and r <= k) / len(outcomes)


def _category(outcomes: Sequence[QueryOutcome]) -> CategoryScore:
    n = len(outcomes)
    return CategoryScore(
        queries=n,
        recall_at_1=sum(1 for o in outcomes if o.rank == 1) / n,
        recall_at_5=sum(1 for o in outcomes if o.rank is not None and o.rank <= 5) / n,
        mrr_at_10=sum(1.0 / o.rank for o in outcomes if o.rank is not None) / n,
    )


def _with_contract(retriever: _Searcher, o: QueryOutcome, version: str | None) -> QueryOutcome:
    hits = retriever.search(o.query, 5, version=version, sources=[MANUAL_SOURCE, "contracts"])
    contract_rank = next((i for i, h in enumerate(hits, 1) if h.section_number == o.contract), None)
    manual = [h.section_number if h.source == MANUAL_SOURCE else "" for h in hits]
    return o.model_copy(
        update={
            "contract_rank": contract_rank,
            "manual_rank_with_contracts": _first(manual, o.expect, descendants=True),
        }
    )
