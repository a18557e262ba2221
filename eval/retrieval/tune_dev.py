"""Try fusion weights on the DEV split only (never test): one retriever, query embeddings cached across
settings. ``PTXRAG_HOME=... python eval/retrieval/tune_dev.py [--version 9.1]``; prints one line per
setting, best recall@1 last."""

from __future__ import annotations

import argparse
import itertools

import torch
from threadpoolctl import threadpool_limits

from ptxrag.indexer import FusionWeights, Retriever, evaluate, load_queries
from ptxrag.indexer.baselines import Ablation
from ptxrag.indexer.evaluation import packaged_set, select


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="9.1")
    args = ap.parse_args()
    threadpool_limits(1, "blas")
    torch.set_num_threads(1)
    dev = select(load_queries(packaged_set(args.version)), "dev")
    r = Retriever()
    rows = []
    # second round (the first, 144 settings, found rrf_k 10 > 30 and the instruction prior helping)
    grid = itertools.product([0.5, 1.0], [1.5, 2.0], [0.0, 1.0], [10.0], [False, True], [0.7, 0.5])
    for title, dense, summary, rrf_k, glossary, ask in grid:
        w = FusionWeights(
            title=title,
            dense=dense,
            summary=summary,
            rrf_k=rrf_k,
            glossary=glossary,
            asks_instruction_factor=ask,
        )
        ev = evaluate(Ablation(r, w), dev, version=args.version, contracts=False)
        rows.append((ev.recall_at_1, ev.recall_at_5, ev.mrr_at_10, w))
        print(f"{ev.recall_at_1:.3f} {ev.recall_at_5:.3f} {ev.mrr_at_10:.3f} {w}", flush=True)
    rows.sort(key=lambda t: (t[0], t[2]))
    print("best:", rows[-1])


if __name__ == "__main__":
    main()
