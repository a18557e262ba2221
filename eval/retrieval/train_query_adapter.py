"""Train the dense query adapter (``ptxrag/indexer/adapter.py``) on pseudo-queries cut from the manual.

    PTXRAG_HOME=<home with 9.1 indexed> python eval/retrieval/train_query_adapter.py [--check-dev]

What it learns: a linear map A (384 x 384, started at 0) that turns a query embedding q into
normalise(q + A q) before the nearest chunks are looked up; the chunk embeddings stay as indexed, so the
index does not change. Training pairs are ``ptxrag.indexer.pseudo.pseudo_queries`` of the indexed manual:
each pseudo-query must rank its own section first among all sections (a section scores its best chunk),
with the chunks that contain the text the query was cut from hidden, so the query has to pull the
section's other text, as a paraphrase written without the manual would. A hashed 15% of the pseudo-queries
is held out to stop training. No hand-written query is read unless ``--check-dev`` is given, and then only
the dev split, to report (and choose the settings on); the test split is never opened.

Deterministic on CPU for a given seed (full-batch order from a seeded generator, one torch thread)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
from pathlib import Path

import numpy as np
import torch

from ptxrag.indexer import Retriever
from ptxrag.indexer.adapter import ADAPTER_PATH, save_adapter
from ptxrag.indexer.catalog import collection_key
from ptxrag.indexer.evaluation import load_queries, packaged_set, select
from ptxrag.indexer.pseudo import holdout, pseudo_queries
from ptxrag.indexer.retriever import dense_query
from ptxrag.indexer.schema import MANUAL_SOURCE


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[*`]+", "", text)).strip().lower()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="9.1")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument(
        "--l2", type=float, default=1e-2, help="penalty on ||A||^2 (keeps it near the base model)"
    )
    ap.add_argument("--tau", type=float, default=0.05, help="softmax temperature over section scores")
    ap.add_argument("--hide-source", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--all-sentences", action="store_true", help="every Description sentence, not the first")
    ap.add_argument("--check-dev", action="store_true", help="report dense recall on the dev split")
    ap.add_argument("--out", type=Path, default=ADAPTER_PATH)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    t0 = time.perf_counter()

    r = Retriever()
    loaded = r._collection(collection_key(MANUAL_SOURCE, args.version))
    got = r._chroma(loaded).get(include=["embeddings", "documents"])
    ids = list(got["ids"])
    vecs = np.asarray(got["embeddings"], dtype=np.float32)
    docs = [_norm(d or "") for d in got["documents"]]
    rows = np.asarray([loaded.chunk_section[i] for i in ids])
    n_sec = len(loaded.sections)

    pq = pseudo_queries(loaded.sections, all_sentences=args.all_sentences)
    emb = r.embedder()
    qv = emb.encode([q.query for q in pq], batch_size=64)
    target = np.asarray([loaded.row_of[q.section] for q in pq])
    # chunks hidden per query: those holding the text it was cut from (when the section keeps another)
    hidden = np.zeros((len(pq), len(ids)), dtype=bool)
    if args.hide_source:
        for i, q in enumerate(pq):
            src = _norm(q.source_text)[:200]
            own = np.nonzero(rows == target[i])[0]
            hit = [c for c in own if src and src in docs[c]]
            if hit and len(hit) < len(own):
                hidden[i, hit] = True
    held = np.asarray([holdout(q.query) for q in pq])
    print(
        f"{len(pq)} pseudo-queries ({int(held.sum())} held out), {len(ids)} chunks, {n_sec} sections, "
        f"{int(hidden.any(1).sum())} with their source chunk hidden; embedded in {time.perf_counter() - t0:.0f} s"
    )

    C = torch.from_numpy(vecs)
    R = torch.from_numpy(rows).long()
    A = torch.zeros(C.shape[1], C.shape[1], requires_grad=True)
    opt = torch.optim.Adam([A], lr=args.lr)

    def section_scores(q: torch.Tensor, hide: torch.Tensor | None) -> torch.Tensor:
        q = torch.nn.functional.normalize(q + q @ A, dim=1)
        sims = q @ C.T
        if hide is not None:
            sims = sims.masked_fill(hide, -2.0)
        out = torch.full((q.shape[0], n_sec), -2.0)
        return out.scatter_reduce(1, R.expand(q.shape[0], -1), sims, reduce="amax")

    Q = torch.from_numpy(qv)
    T = torch.from_numpy(target).long()
    H = torch.from_numpy(hidden)
    tr = torch.from_numpy(~held)
    va = torch.from_numpy(held)

    def recall1(mask: torch.Tensor) -> float:
        with torch.no_grad():
            s = section_scores(Q[mask], H[mask])
            return float((s.argmax(1) == T[mask]).float().mean())

    print(f"before: train r@1 {recall1(tr):.3f} held-out r@1 {recall1(va):.3f}")
    best, best_state, best_epoch = -1.0, A.detach().clone(), 0
    idx = torch.nonzero(tr).squeeze(1)
    for epoch in range(1, args.epochs + 1):
        perm = idx[torch.randperm(len(idx))]
        for start in range(0, len(perm), 256):
            b = perm[start : start + 256]
            loss = torch.nn.functional.cross_entropy(section_scores(Q[b], H[b]) / args.tau, T[b])
            loss = loss + args.l2 * (A**2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 5 == 0 or epoch == args.epochs:
            v = recall1(va)
            print(f"epoch {epoch}: loss {float(loss):.3f} train r@1 {recall1(tr):.3f} held-out r@1 {v:.3f}")
            if v > best:
                best, best_state, best_epoch = v, A.detach().clone(), epoch
    print(f"kept epoch {best_epoch} (held-out r@1 {best:.3f}); {time.perf_counter() - t0:.0f} s in all")

    if args.check_dev:
        dev = select(load_queries(packaged_set(args.version)), "dev")
        dq = torch.from_numpy(emb.encode([dense_query(q.query) for q in dev], batch_size=64))

        def dense_recall(a: torch.Tensor, k: int) -> float:
            q = torch.nn.functional.normalize(dq + dq @ a, dim=1)
            s = torch.full((len(dev), n_sec), -2.0).scatter_reduce(
                1, R.expand(len(dev), -1), q @ C.T, reduce="amax"
            )
            top = s.topk(k, dim=1).indices.tolist()
            hit = 0
            for qq, t in zip(dev, top, strict=True):
                nums = [loaded.sections[i].number for i in t]
                hit += any(n == e or n.startswith(e + ".") for n in nums for e in qq.expect)
            return hit / len(dev)

        zero = torch.zeros_like(best_state)
        print(
            f"dev dense-only (manual): base r@1 {dense_recall(zero, 1):.3f} r@5 {dense_recall(zero, 5):.3f}; "
            f"adapted r@1 {dense_recall(best_state, 1):.3f} r@5 {dense_recall(best_state, 5):.3f}"
        )

    if not args.no_save:
        data = hashlib.sha256("\n".join(f"{q.section}\t{q.query}" for q in pq).encode()).hexdigest()[:16]
        meta = {
            "trained_on": f"ptx-isa {args.version} pseudo-queries ({len(pq)}, sha256 {data})",
            "seed": args.seed,
            "epochs": best_epoch,
            "lr": args.lr,
            "l2": args.l2,
            "tau": args.tau,
            "hide_source": args.hide_source,
            "all_sentences": args.all_sentences,
            "heldout_r1": round(best, 4),
        }
        save_adapter(args.out, best_state.numpy(), r.spec, meta)
        print(f"wrote {args.out}: {json.dumps(meta)}")


if __name__ == "__main__":
    main()
