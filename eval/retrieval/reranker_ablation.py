"""Score a packaged set (9.1 by default) with the retriever's ablations and with another reranker file beside the
packaged one (``--reranker NAME=PATH``, e.g. one trained by ``train_reranker.py --train-on pseudo``) or
another reader file (``--reader NAME=PATH``, one written by ``train_reader.py --out``).
Each search embeds its query afresh (cache cleared), so the latencies are those of new queries; torch
uses ``--threads`` threads (1 by default, as the CLI does), BLAS one.

    PTXRAG_HOME=... python eval/retrieval/reranker_ablation.py --split dev --ablation default \\
        --reranker pseudo=/tmp/rerank-pseudo.json
    PTXRAG_HOME=... python eval/retrieval/reranker_ablation.py --split test --queries eval/fresh/ptx-isa-9.1-fresh.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from ptxrag.indexer import Retriever, evaluate, load_queries
from ptxrag.indexer.baselines import ABLATION_NAMES, searcher
from ptxrag.indexer.evaluation import packaged_set, select
from ptxrag.indexer.reader import reader_for
from ptxrag.indexer.rerank import load_reranker


class _Fresh:
    """A searcher whose every search embeds its query anew."""

    def __init__(self, retriever: Retriever, inner: object) -> None:
        self.retriever, self.inner = retriever, inner

    def search(self, query: str, k: int = 5, **kw: object) -> list:  # type: ignore[type-arg]
        self.retriever.clear_query_cache()
        return self.inner.search(query, k, **kw)  # type: ignore[attr-defined, no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["dev", "test"], required=True)
    ap.add_argument("--version", default="9.1", help="the manual and packaged set (9.1, 9.0)")
    ap.add_argument("--ablation", nargs="*", default=list(ABLATION_NAMES))
    ap.add_argument("--reranker", nargs="*", default=[], help="NAME=PATH of a reranker file")
    ap.add_argument(
        "--queries",
        type=Path,
        help="another query file instead of the packaged set (e.g. eval/fresh/ptx-isa-9.1-fresh.jsonl; its rows "
        "without a split count in every split)",
    )
    ap.add_argument("--reader", nargs="*", default=[], help="NAME=PATH of a reader file")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the latency goal is for 2 cores)")
    args = ap.parse_args()
    threadpool_limits(1, "blas")
    torch.set_num_threads(args.threads)
    queries = select(load_queries(args.queries or packaged_set(args.version)), args.split)
    r = Retriever()
    runs: list[tuple[str, object]] = [(n, searcher(n, r, args.version)) for n in args.ablation]
    for spec in args.reranker:
        name, path = spec.split("=", 1)
        other = Retriever()
        other.reranker = load_reranker(Path(path))
        if other.reranker is None:
            raise SystemExit(f"{path}: no reranker for today's features")
        runs.append((f"reranker:{name}", other))
    for spec in args.reader:
        name, path = spec.split("=", 1)
        other = Retriever()
        other.reader = reader_for(other.spec, Path(path))
        if other.reader is None:
            raise SystemExit(f"{path}: no reader for this model")
        runs.append((f"reader:{name}", other))
    calls: dict[str, list[float]] = {"ms": []}
    for reader in {
        id(x.reader): x.reader for x in (r, *(s for _, s in runs if isinstance(s, Retriever)))
    }.values():
        if reader is not None:
            inner = reader.scores

            def counted(*a: object, inner=inner, **kw: object) -> object:  # type: ignore[no-untyped-def]
                t0 = time.perf_counter()
                out = inner(*a, **kw)
                calls["ms"].append((time.perf_counter() - t0) * 1000)
                return out

            reader.scores = counted  # type: ignore[method-assign]
    for name, s in runs:
        base = s if isinstance(s, Retriever) else r
        calls["ms"] = []
        ev = evaluate(
            _Fresh(base, s),
            queries,
            version=args.version,
            split=args.split,
            label=name,
            contracts=name != "bm25-chunks",
        )
        cats = {c: [round(v.recall_at_1, 2), round(v.recall_at_5, 2)] for c, v in ev.by_category.items()}
        row = {
            "label": name,
            "n": ev.queries,
            "r1": round(ev.recall_at_1, 3),
            "r5": round(ev.recall_at_5, 3),
            "r10": round(ev.recall_at_10, 3),
            "mrr10": round(ev.mrr_at_10, 3),
            "ndcg10": round(ev.ndcg_at_10, 3),
            "exact1": round(ev.exact_recall_at_1, 3),
            "ctr5": ev.contract_recall_at_5,
            "man5": ev.contract_manual_recall_at_5,
            "wall_p50_ms": round(ev.median_query_ms, 1),
            "wall_p95_ms": round(ev.p95_query_ms, 1),
            "cpu_p50_ms": round(ev.median_cpu_ms, 1),
            "cpu_p95_ms": round(ev.p95_cpu_ms, 1),
            "reader_calls": len(calls["ms"]),
            "reader_ms_p50": round(statistics.median(calls["ms"]), 1) if calls["ms"] else None,
            "reader_ms_max": round(max(calls["ms"]), 1) if calls["ms"] else None,
            "by_category": cats,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
