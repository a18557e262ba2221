"""Train the linear reranker (``ptxrag/indexer/rerank.py``) on the DEV split of the packaged sets.

    PTXRAG_HOME=<home with 9.1, 9.0 and the pack indexed> python eval/retrieval/train_reranker.py

For every dev query (9.1 and, when indexed, 9.0; manual only, and for contract queries also manual +
contracts) the retriever's first ``RERANK_DEPTH`` fused candidates are recorded with their features
(reranker off). A linear scorer is fitted with a listwise softmax loss (the probability mass on the
relevant candidates: an expected section, a descendant of one, or the expected contract) and an L2
penalty. The penalty is chosen by 5-fold cross-validation over the dev queries (folds by a hash of the
query text), the CV recall@1/@5 is printed beside the fused order's, and the final weights are fitted on
all dev queries and written to ``ptxrag/indexer/adapters/rerank.json``. The test split is never opened.
Deterministic for a seed (one torch thread, full-batch L-BFGS)."""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from ptxrag.indexer import Retriever
from ptxrag.indexer.evaluation import answers, load_queries, packaged_set, select
from ptxrag.indexer.pseudo import holdout, pseudo_queries
from ptxrag.indexer.rerank import FEATURES, RERANK_DEPTH, RERANK_PATH, Reranker, features
from ptxrag.indexer.schema import MANUAL_SOURCE


def collect(r: Retriever, version: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(query, features, relevant mask) per search of the dev split of ``version``."""
    out = []
    for q in select(load_queries(packaged_set(version)), "dev"):
        searches = [[MANUAL_SOURCE]] + ([[MANUAL_SOURCE, "contracts"]] if q.contract else [])
        for sources in searches:
            keys = r._keys(version, sources)
            fused = r.fused(q.query, keys, r.weights)
            top = fused.ranked[:RERANK_DEPTH]
            rel = np.asarray(
                [
                    any(answers(c.key[1], e) for e in q.expect)
                    if c.key[0].startswith(MANUAL_SOURCE + "@")
                    else c.key[1] == q.contract
                    for c, _ in top
                ]
            )
            x = features(r.rerank_rows(top, fused.bonus, fused.weights), q.query, **fused.intents)
            out.append((q.query, x, rel))
    return out


def collect_pseudo(r: Retriever, version: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(query, features, relevant mask) per pseudo-query of the manual of ``version`` (``pseudo.py``:
    cut from the manual's own text, names masked; no hand-written query). The fused top ``RERANK_DEPTH``
    of each holds its section's siblings and parents, the hard negatives."""
    key = r._keys(version, [MANUAL_SOURCE])[0]
    sections = r._collection(key).sections
    out = []
    for pq in pseudo_queries(sections):
        fused = r.fused(pq.query, [key], r.weights)
        top = fused.ranked[:RERANK_DEPTH]
        rel = np.asarray([answers(c.key[1], pq.section) for c, _ in top])
        x = features(r.rerank_rows(top, fused.bonus, fused.weights), pq.query, **fused.intents)
        out.append((pq.query, x, rel))
    return out


def collect_written(
    r: Retriever, version: str, paths: list[Path]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(query, features, relevant mask) per written training query that the query tower did NOT train on
    (its hashed 10% hold-out, ``train_query_tower.held_out``), so the tower's signal is out of sample
    here as it is for a new query, and the query memory (``memory.py``) without the query's own round
    (which holds the query itself and the queries written beside it), as it is for a new query. A manual
    section's query searches the manual; a pack document's query searches the manual and that
    document's source."""
    from train_query_tower import written_searches

    out = []
    for w in written_searches(r, version, paths):
        if not w.held:
            continue
        query, section = w.query, w.section
        fused = r.fused(query, r._keys(version, w.sources), r.weights, memory_without=w.round)
        top = fused.ranked[:RERANK_DEPTH]
        rel = np.asarray(
            [
                answers(c.key[1], section)
                if c.key[0].startswith(MANUAL_SOURCE + "@")
                else c.key[1] == section
                for c, _ in top
            ]
        )
        x = features(r.rerank_rows(top, fused.bonus, fused.weights), query, **fused.intents)
        out.append((query, x, rel))
    return out


def fit(
    data: list[tuple[str, np.ndarray, np.ndarray]],
    l2: float,
    mean: np.ndarray,
    scale: np.ndarray,
    keep: np.ndarray,
) -> np.ndarray:
    """Listwise softmax fit; features outside ``keep`` get weight 0 (ablations)."""
    usable = [(x, m) for _, x, m in data if m.any()]
    # one padded batch: searches x candidates x features, padding masked out of the softmax
    n = max(len(x) for x, _ in usable)
    xs = np.zeros((len(usable), n, len(FEATURES)), dtype=np.float32)
    valid = np.zeros((len(usable), n), dtype=bool)
    rel = np.zeros((len(usable), n), dtype=bool)
    for i, (x, m) in enumerate(usable):
        xs[i, : len(x)] = (x - mean) / scale * keep
        valid[i, : len(x)] = True
        rel[i, : len(x)] = m
    bx, bvalid, brel = torch.from_numpy(xs), torch.from_numpy(valid), torch.from_numpy(rel)
    w = torch.zeros(len(FEATURES), dtype=torch.float32, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=0.5, max_iter=300, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        logits = (bx @ w).masked_fill(~bvalid, -1e9)
        logp = torch.log_softmax(logits, dim=1)
        loss = -torch.logsumexp(logp.masked_fill(~brel, -1e9), dim=1).mean() + l2 * (w**2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy()


def ranks(data: list[tuple[str, np.ndarray, np.ndarray]], score) -> list[int | None]:  # type: ignore[no-untyped-def]
    out: list[int | None] = []
    for _, x, m in data:
        order = np.argsort(-score(x), kind="stable")
        hit = np.nonzero(m[order])[0]
        out.append(int(hit[0]) + 1 if len(hit) else None)
    return out


def recall(rs: list[int | None], k: int) -> float:
    return sum(1 for r in rs if r is not None and r <= k) / len(rs)


def fold(query: str, n: int) -> int:
    return int(hashlib.sha256(query.encode()).hexdigest()[:8], 16) % n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--l2", type=float, nargs="*", default=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    ap.add_argument("--out", type=Path, default=RERANK_PATH)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument(
        "--train-on",
        choices=["dev", "pseudo"],
        default="dev",
        help="dev: the dev splits (penalty by 5-fold CV); pseudo: the 9.1 manual's pseudo-queries only "
        "(penalty by their hashed hold-out), the dev split then only reported",
    )
    ap.add_argument("--drop", nargs="*", default=[], help="features (or suffixes, e.g. adapted) left out")
    ap.add_argument(
        "--written",
        type=Path,
        nargs="*",
        default=[],
        help="written training queries (eval/retrieval/training/*.jsonl): the query tower's hold-out of "
        "them joins every training fold; the penalty is still chosen by CV over dev",
    )
    args = ap.parse_args()
    keep = np.asarray(
        [not any(f == d or f.endswith("_" + d) for d in args.drop) for f in FEATURES], dtype=np.float32
    )
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    threadpool_limits(1, "blas")
    t0 = time.perf_counter()
    r = Retriever()
    dev = []
    for v in ("9.1", "9.0"):
        if v in r.versions():
            dev += collect(r, v)
    if args.train_on == "pseudo":
        train_pseudo(r, dev, args, keep)
        return
    data = dev
    extra = collect_written(r, "9.1", args.written) if args.written else []
    if extra:
        print(f"{len(extra)} written hold-out searches join every training fold")
    print(
        f"{len(data)} dev searches ({sum(1 for d in data if d[2].any())} with a relevant candidate in the top {RERANK_DEPTH}), {time.perf_counter() - t0:.0f} s"
    )
    allx = np.concatenate([x for _, x, _ in data])
    mean = allx.mean(0)
    scale = np.where(allx.std(0) > 1e-6, allx.std(0), 1.0)
    fused_ranks = ranks(data, lambda x: -np.arange(len(x), dtype=np.float32))
    print(f"fused order: r@1 {recall(fused_ranks, 1):.3f} r@5 {recall(fused_ranks, 5):.3f}")
    best = None
    for l2 in args.l2:
        cv: list[int | None] = [None] * len(data)
        for f in range(5):
            train = [d for d in data if fold(d[0], 5) != f] + extra
            w = fit(train, l2, mean, scale, keep)
            for i, d in enumerate(data):
                if fold(d[0], 5) == f:
                    cv[i] = ranks([d], lambda x, w=w: ((x - mean) / scale) @ w)[0]
        r1, r5 = recall(cv, 1), recall(cv, 5)
        print(f"l2 {l2:g}: 5-fold CV r@1 {r1:.3f} r@5 {r5:.3f}")
        if best is None or (r1, r5) > best[1:]:
            best = (l2, r1, r5)
    assert best is not None
    l2 = best[0]
    w = fit(data + extra, l2, mean, scale, keep)
    print(
        f"chosen l2 {l2:g}; weights: " + ", ".join(f"{n} {v:+.2f}" for n, v in zip(FEATURES, w, strict=True))
    )
    if not args.no_save:
        meta = {
            "trained_on": f"dev split of the packaged sets, {len(data)} searches"
            + (f", and {len(extra)} written queries the query tower did not train on" if extra else ""),
            "seed": args.seed,
            "l2": l2,
            "cv_recall_at_1": round(best[1], 4),
            "cv_recall_at_5": round(best[2], 4),
            "fused_recall_at_1": round(recall(fused_ranks, 1), 4),
            "dropped": list(args.drop),
        }
        rr = Reranker(w.astype(np.float32), mean.astype(np.float32), scale.astype(np.float32), meta)
        args.out.write_text(rr.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


def train_pseudo(r: Retriever, dev: list[tuple[str, np.ndarray, np.ndarray]], args, keep) -> None:  # type: ignore[no-untyped-def]
    """Fit on the 9.1 pseudo-queries, choose the penalty on their hold-out, report the dev splits."""
    t0 = time.perf_counter()
    data = collect_pseudo(r, "9.1")
    train = [d for d in data if not holdout(d[0])]
    held = [d for d in data if holdout(d[0])]
    print(f"{len(train)} pseudo-queries to train, {len(held)} held out, {time.perf_counter() - t0:.0f} s")
    allx = np.concatenate([x for _, x, _ in train])
    mean = allx.mean(0)
    scale = np.where(allx.std(0) > 1e-6, allx.std(0), 1.0)
    fused = ranks(dev, lambda x: -np.arange(len(x), dtype=np.float32))
    print(f"dev fused order: r@1 {recall(fused, 1):.3f} r@5 {recall(fused, 5):.3f}")
    best = None
    for l2 in args.l2:
        w = fit(train, l2, mean, scale, keep)
        h = ranks(held, lambda x, w=w: ((x - mean) / scale) @ w)
        d = ranks(dev, lambda x, w=w: ((x - mean) / scale) @ w)
        print(
            f"l2 {l2:g}: hold-out r@1 {recall(h, 1):.3f} r@5 {recall(h, 5):.3f} | dev (not trained on) "
            f"r@1 {recall(d, 1):.3f} r@5 {recall(d, 5):.3f}",
            flush=True,
        )
        if best is None or (recall(h, 1), recall(h, 5)) > best[1:3]:
            best = (l2, recall(h, 1), recall(h, 5), w, recall(d, 1), recall(d, 5))
    assert best is not None
    l2, w = best[0], best[3]
    print(
        f"chosen l2 {l2:g} (hold-out); weights: "
        + ", ".join(f"{n} {v:+.2f}" for n, v in zip(FEATURES, w, strict=True))
    )
    if not args.no_save:
        meta = {
            "trained_on": f"pseudo-queries of the 9.1 manual (pseudo.py), {len(train)} searches",
            "seed": args.seed,
            "l2": l2,
            "holdout_recall_at_1": round(best[1], 4),
            "dev_recall_at_1": round(best[4], 4),
            "dev_recall_at_5": round(best[5], 4),
            "dropped": list(args.drop),
        }
        rr = Reranker(w.astype(np.float32), mean.astype(np.float32), scale.astype(np.float32), meta)
        args.out.write_text(rr.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
