"""Build the query memory (``ptxrag/indexer/memory.py``): every written training query, embedded by the
packaged query tower, kept as an extra vector of the section it was written for.

    PTXRAG_HOME=<home with 9.1 and the pack indexed> python eval/retrieval/build_query_memory.py \
        --queries eval/retrieval/training/*.jsonl

Each entry records its section's number and title (from the indexed 9.1 manual or the pack) and its
round, so that another manual version uses only the entries of sections it shares, and the reranker's
trainer can leave a held-out query's own round out. A query whose text is an evaluation query is dropped
(``train_query_tower.read_training``). Run it again after the query tower is retrained: the memory names
the tower file it was embedded with and is ignored beside any other. Deterministic (about 200 s for 18,721 queries on two
threads here)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_query_tower import read_training_rounds  # noqa: E402

from ptxrag.indexer import Retriever  # noqa: E402
from ptxrag.indexer.memory import MEMORY_PATH, save_memory, tower_digest  # noqa: E402
from ptxrag.indexer.retriever import dense_query  # noqa: E402
from ptxrag.indexer.schema import MANUAL_SOURCE  # noqa: E402
from ptxrag.indexer.tower import TOWER_PATH, encode_tuned  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, nargs="+", required=True)
    ap.add_argument("--version", default="9.1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=MEMORY_PATH)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    r = Retriever()
    if r.tower is None:
        sys.exit("no query tower fits the index's model: the memory is embedded by the tower")
    titles: dict[str, str] = {}
    for source in r.sources():
        key = r._keys(args.version if source == MANUAL_SOURCE else None, [source])[0]
        for s in r._collection(key).sections:
            titles.setdefault(s.number, s.title)
    rows = read_training_rounds(args.queries)
    unknown = sorted({s for _, s, _ in rows if s not in titles})
    if unknown:
        print(f"skipping the queries of {len(unknown)} sections not indexed: {unknown[:10]}")
    rows = [row for row in rows if row[1] in titles]

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(r.spec.location, device="cpu")
    tuned = r.tower.build(model)
    first = r.tower.layers[0]
    t0 = time.perf_counter()
    out = []
    for i, (q, _, _) in enumerate(rows):
        out.append(encode_tuned(model, tuned, first, dense_query(q)))  # as a search embeds a query
        if (i + 1) % 2000 == 0 or i + 1 == len(rows):
            print(f"embedded {i + 1}/{len(rows)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    save_memory(
        args.out,
        np.stack(out),
        [s for _, s, _ in rows],
        [titles[s] for _, s, _ in rows],
        [rnd for _, _, rnd in rows],
        r.spec,
        tower_digest(TOWER_PATH),
        {
            "queries": len(rows),
            "sections": len({s for _, s, _ in rows}),
            "files": [p.name for p in args.queries],
            "manual": args.version,
        },
    )
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(rows)} queries)")


if __name__ == "__main__":
    main()
