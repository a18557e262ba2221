"""Retrieval scoring without an index: descendant-aware hits, MRR@10, nDCG@10 (a scripted searcher)."""

from __future__ import annotations

import math

import pytest

from ptxrag.indexer.evaluation import EvalQuery, answers, evaluate, ndcg
from ptxrag.indexer.schema import Hit


class _ScriptedSearcher:
    """Returns fixed section numbers per query (evaluate() reads only section_number)."""

    def __init__(self, tops: dict[str, list[str]]) -> None:
        self.tops = tops

    def search(self, query: str, k: int = 5, *, version=None, sources=None) -> list[Hit]:  # type: ignore[no-untyped-def]
        return [
            Hit(
                section_number=n,
                title=n,
                version="9.1",
                source="ptx-isa",
                url=None,
                score=1.0 / i,
                text="",
                breadcrumb=n,
            )
            for i, n in enumerate(self.tops[query][:k], start=1)
        ]


@pytest.mark.parametrize(
    ("hit", "expected", "ok"),
    [
        ("9.7.13.15.16", "9.7.13.15.16", True),
        ("9.7.13.15.16.2", "9.7.13.15.16", True),
        ("9.7.13.15.160", "9.7.13.15.16", False),  # numeric prefix is not a descendant
        ("9.7.13.15", "9.7.13.15.16", False),  # the parent does not answer a subsection query
        ("9.7.13.15.17", "9.7.13.15.16", False),  # sibling
    ],
)
def test_descendant_relevance(hit: str, expected: str, ok: bool) -> None:
    assert answers(hit, expected) is ok


def test_ndcg_binary_and_credited_once() -> None:
    assert ndcg(["1.2"], ["1.2"]) == 1.0
    assert ndcg(["3", "1.2"], ["1.2"]) == pytest.approx(1 / math.log2(3))
    # two descendants of one expected section earn one gain, not two
    assert ndcg(["1.2.1", "1.2.2"], ["1.2", "4"]) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg(["9", "8"], ["1.2"]) == 0.0


def test_evaluate_counts_descendants_and_keeps_exact_rank() -> None:
    searcher = _ScriptedSearcher(
        {"sub": ["9.7.1.3", "9.7.1"], "parent": ["9.7", "9.7.10", "9.7.1"], "miss": ["2", "3"]}
    )
    qs = [EvalQuery(query=q, expect=["9.7.1"]) for q in ("sub", "parent", "miss")]
    ev = evaluate(searcher, qs)
    ranks = {o.query: (o.rank, o.exact_rank) for o in ev.outcomes}
    assert ranks == {"sub": (1, 2), "parent": (3, 3), "miss": (None, None)}
    assert ev.recall_at_1 == pytest.approx(1 / 3)
    assert ev.exact_recall_at_1 == 0.0
    assert ev.recall_at_5 == pytest.approx(2 / 3)
    assert ev.mrr_at_10 == pytest.approx((1 + 1 / 3) / 3)
    assert ev.ndcg_at_10 == pytest.approx((1 + 0.5) / 3)
    assert ev.p95_query_ms >= ev.median_query_ms >= 0
