"""What each retrieval mechanism adds, cumulatively, on one split of the packaged set (run it on dev to
choose, then once on test to report). ``PTXRAG_HOME=... python eval/retrieval/steps.py --split test``"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from ptxrag.indexer import FusionWeights, Retriever, evaluate, load_queries
from ptxrag.indexer.baselines import Ablation
from ptxrag.indexer.evaluation import packaged_set, select

OLD = dict(
    reader=False,
    memory=False,
    rerank=False,
    tower=False,
    history_factor=1.0,
    dense_rewrite=False,
    lexical=1.0,
    title=1.0,
    dense=1.0,
    summary=0.0,
    glossary=False,
    asks_instruction_factor=1.0,
    pack_share=1.0,
)
STEPS: list[tuple[str, dict[str, object]]] = [
    ("summary chunk in the dense index, old weights", {}),
    ("+ BM25 over title + summary", {"summary": 1.0}),
    ("+ instruction prior for 'which instruction' queries", {"asks_instruction_factor": 0.7}),
    ("+ CUDA-term glossary", {"glossary": True}),
    ("+ dense weight 2", {"dense": 2.0}),
    ("+ knowledge-pack quota (2 of 5)", {"pack_share": 0.4}),
    (
        "+ history intent, dense question rewrite",
        {"history_factor": 0.6, "dense_rewrite": True},
    ),
    ("+ query tower (the query embedded by tower.py)", {"tower": True}),
    (
        "+ fusion weights chosen with the tower (dense 6, title 0.5; = fusion-tuned)",
        {"dense": 6.0, "title": 0.5},
    ),
    ("+ query memory (remembered training queries as section vectors, memory.py)", {"memory": True}),
    ("+ learned reranker (= no-reader)", {"rerank": True}),
    ("+ reader over a close call's first two (= default)", {"reader": True}),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["dev", "test"], required=True)
    ap.add_argument("--version", default="9.1")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    threadpool_limits(1, "blas")
    torch.set_num_threads(1)
    queries = select(load_queries(packaged_set(args.version)), args.split)
    r = Retriever()
    r.search("warm-up", 1, version=args.version, sources=["ptx-isa"])
    final = dict(OLD)
    for _, change in STEPS:
        final.update(change)
    last, default = FusionWeights(**final).model_dump(), FusionWeights().model_dump()
    drift = {k: (last[k], v) for k, v in default.items() if last[k] != v}
    if drift:  # the last step must be the default, or its label lies
        raise SystemExit(f"the last step is not FusionWeights(): (step, default) {drift}")
    cfg = dict(OLD)
    out = []
    for label, change in STEPS:
        cfg.update(change)
        r.clear_query_cache()
        ev = evaluate(
            Ablation(r, FusionWeights(**cfg)), queries, version=args.version, split=args.split, label=label
        )  # type: ignore[arg-type]
        cats = " ".join(f"{k}:{v.recall_at_1:.2f}/{v.recall_at_5:.2f}" for k, v in ev.by_category.items())
        print(
            f"{label}: r@1 {ev.recall_at_1:.3f} r@5 {ev.recall_at_5:.3f} r@10 {ev.recall_at_10:.3f} "
            f"MRR@10 {ev.mrr_at_10:.3f} nDCG@10 {ev.ndcg_at_10:.3f} contract r@5 {ev.contract_recall_at_5:.3f} "
            f"manual beside contracts r@5 {ev.contract_manual_recall_at_5:.3f} wall p50/p95 "
            f"{ev.median_query_ms:.1f}/{ev.p95_query_ms:.1f} ms cpu p50/p95 {ev.median_cpu_ms:.1f}/{ev.p95_cpu_ms:.1f} ms\n    {cats}",
            flush=True,
        )
        out.append(ev.model_dump(mode="json"))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
