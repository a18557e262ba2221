"""Train the reader (``ptxrag/indexer/reader.py``): a small cross-encoder over the reranker's first candidates.

    cd <repo> && PTXRAG_HOME=<home with 9.1 and the pack indexed> nice -n 15 python \\
        eval/retrieval/train_reader.py --queries eval/retrieval/training/*.jsonl \\
        [--layers 2] [--max-len 64] [--epochs 3] [--mined /tmp/reader-mined.json] [--out PATH]

Data: the written training queries of ``eval/retrieval/training/*.jsonl`` (fields ``query``, ``section``;
LLM sessions wrote them section by section and never saw the evaluation sets), read and de-duplicated as
``train_query_tower.read_training`` does. The query tower's hashed 10% hold-out (``held_out``) is held out
here too and only reported. For each query the retriever's reranked list is mined twice (reader off): with
the query tower (what a search sees) and without it (``FusionWeights(tower=False)``), because the tower
trained on these very queries and ranks their section first almost always, which would make its lists
easy; a query's hard negatives are the candidates of both top-10 lists that do not answer it (not its
section nor a descendant of it). The mined lists are written to ``--mined`` and reused when the data and
the index are the same.

Model: the lowest ``--layers`` layers of the packaged all-MiniLM-L6-v2 (fine-tuned) over its frozen word,
position and type embeddings, reading "[CLS] query [SEP] breadcrumb (defined names) : purpose and
Description [SEP]" cut to ``--max-len`` tokens; a linear head on [CLS] (``--head cls``), or that head
(from zero) plus a learned scale (from ``--scale``) times the late-interaction match of the jointly read
tokens (``--head maxsim``: each query token's best cosine with a candidate token, averaged; untrained it
already prefers the right one of two close candidates more often than a [CLS] head trained here). Each
step takes ``--batch``
queries, each with its section and ``--group``-1 negatives drawn (seeded) from its first 8 hard negatives,
and minimises the softmax cross-entropy of the section within its group (AdamW, warm-up then linear
decay, bf16 autocast on CPU). Deterministic for a seed and a thread count.

Choice: the stage reorders the default retriever's first ``k`` candidates by reranker log-probability +
``mix`` x reader score when the second is at least ``gate`` as likely as the first. The grid is scored on
the dev split of the packaged 9.1 set (manual only, as ``evaluate`` does) and on the held-out training
queries; ``k``, ``mix`` and ``gate`` are chosen by the sum of the two recalls@1 (dev's 162 queries alone
let one query decide between settings; the reader never trained on either set, the reranker trained on
both), then dev MRR@10, then the cheaper setting. The test split is never opened.

Findings (session 7, this 2-core machine; dev = 9.1 dev split, held = the 1,246 held-out queries):

- a [CLS] head (``--head cls``) learns slowly here: after 2 epochs at lr 1e-4 the loss was 1.24 (ln 4 =
  1.39) and alone over today's first two it ranked the right one first for dev recall@1 0.506 (3 epochs
  at 3e-4: 0.636); mixed in, dev 0.765 -> 0.778, held 0.734 -> 0.738.
- the token match (``--head maxsim``) is useful untrained (dev 0.648 alone over the first two) and trains
  well: 2 layers, 64 tokens, 3 epochs at 2e-4 (973 s): alone 0.784 dev / 0.692 held; chosen k=2, mix 6,
  gate 0.3: dev recall@1 0.765 -> 0.833, MRR@10 0.853 -> 0.887, held 0.734 -> 0.744, read on 35% of
  searches. 1 layer (524 s): alone 0.691 dev; best mixes dev 0.802-0.815, held 0.743-0.749. The 2-layer
  reader read at 48 / 40 / 32 tokens without retraining: dev 0.809 / 0.778 / 0.759. A 3-layer run was
  stopped after 100 steps (under the machine's other load it would have taken hours).
- cost: about 9 ms per search it reads at one torch thread (2 layers, 2 x 64 tokens, bf16; the linear
  layers dominate), so the whole search's p95 goes from 17.8 to 22.7 ms at one thread (over the 20 ms
  budget) and from 15.5 to 17.1 ms wall at two; it was opt-in at first (session 8 turned it on, with two
  torch threads where two cores are idle). ``--no-save`` scores without writing the artefact."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptxrag.indexer import Retriever
from ptxrag.indexer.evaluation import answers, load_queries, packaged_set, select
from ptxrag.indexer.fusion import FusionWeights
from ptxrag.indexer.memory import MEMORY_PATH
from ptxrag.indexer.reader import READER_PATH, doc_ids, pair_ids, save_reader, score_pairs
from ptxrag.indexer.rerank import RERANK_PATH
from ptxrag.indexer.schema import MANUAL_SOURCE
from ptxrag.indexer.tower import TOWER_PATH

sys.path.insert(0, str(Path(__file__).parent))
from train_query_tower import written_searches  # noqa: E402

#: the depth of the mined lists
DEPTH = 10
#: negatives of a query are drawn from its first this many hard negatives
NEG_POOL = 8
Key = tuple[str, str]


def reranked(
    r: Retriever, query: str, keys: list[str], w: FusionWeights, memory_without: str | None = None
) -> list[tuple[Key, float]]:
    """The first ``DEPTH`` of a search's reranked list (reader off): (key, relative probability); a
    written query searches without its own round of the query memory (which holds the query itself)."""
    fused = r.fused(query, keys, w, memory_without=memory_without)
    ranked = fused.ranked
    if r.reranker is not None and len(ranked) > 1:
        ranked = r._rerank(r.reranker, query, fused)
    return [(c.key, float(v)) for c, v in ranked[:DEPTH]]


def relevant(key: Key, expect: list[str]) -> bool:
    if key[0].startswith(MANUAL_SOURCE + "@"):
        return any(answers(key[1], e) for e in expect)
    return key[1] in expect


def mine(r: Retriever, version: str, paths: list[Path]) -> dict[str, Any]:
    base = FusionWeights(tower=False)
    train: list[dict[str, Any]] = []
    t0 = time.time()
    data = written_searches(r, version, paths)
    for n, w in enumerate(data):
        keys = r._keys(version, w.sources)
        rec = {
            "query": w.query,
            "expect": [w.section],
            "own": list(w.own),
            "held": w.held,
            "default": reranked(r, w.query, keys, r.weights, w.round),
        }
        if not w.held:
            rec["base"] = reranked(r, w.query, keys, base, w.round)
        train.append(rec)
        if n % 1000 == 0:
            print(f"  mined {n}/{len(data)} ({time.time() - t0:.0f} s)", flush=True)
    dev = []
    for q in select(load_queries(packaged_set(version)), "dev"):
        keys = r._keys(version, [MANUAL_SOURCE])
        dev.append(
            {"query": q.query, "expect": list(q.expect), "default": reranked(r, q.query, keys, r.weights)}
        )
    return {"train": train, "dev": dev}


def digest(paths: list[Path], r: Retriever) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.read_bytes())
    h.update(json.dumps(sorted(r._entries), sort_keys=True).encode())
    for artefact in (TOWER_PATH, MEMORY_PATH, RERANK_PATH):  # lists mined with other learned parts are stale
        if artefact.is_file():
            h.update(artefact.read_bytes())
    h.update(str(r.store.home).encode())
    return h.hexdigest()[:16]


class Texts:
    """Token ids of candidates' reader texts, remembered."""

    def __init__(self, r: Retriever, tok: Any, max_len: int) -> None:
        self.r, self.tok, self.max_len = r, tok, max_len
        self.ids: dict[Key, list[int]] = {}

    def __call__(self, key: Key) -> list[int]:
        got = self.ids.get(key)
        if got is None:
            self.r._collection(key[0])
            text = self.r._reader_text(key)
            got = self.ids[key] = doc_ids(self.tok, text, self.max_len)
        return got


def negatives(rec: dict[str, Any]) -> list[Key]:
    seen: set[Key] = set()
    out: list[Key] = []
    for tag in ("default", "base"):
        for k, _ in rec.get(tag, []):
            key = (k[0], k[1])
            if key not in seen and not relevant(key, rec["expect"]):
                seen.add(key)
                out.append(key)
    return out


def ranks_of(order: list[Key], expect: list[str]) -> int | None:
    for i, k in enumerate(order, start=1):
        if relevant(k, expect):
            return i
    return None


def metrics(rs: list[int | None]) -> dict[str, float]:
    n = len(rs) or 1
    return {
        "r1": sum(1 for x in rs if x == 1) / n,
        "r5": sum(1 for x in rs if x is not None and x <= 5) / n,
        "mrr10": sum(1 / x for x in rs if x is not None and x <= 10) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, nargs="+", required=True)
    ap.add_argument("--version", default="9.1")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument(
        "--head",
        choices=["cls", "maxsim"],
        default="maxsim",
        help="cls: a linear head on [CLS]; maxsim: that (from zero) plus --scale x the token match",
    )
    ap.add_argument("--scale", type=float, default=20.0, help="initial scale of the token match")
    ap.add_argument("--group", type=int, default=4, help="pairs per query in a step: its section + negatives")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N training queries (smoke)")
    ap.add_argument("--mined", type=Path, default=Path("/tmp/reader-mined.json"))
    ap.add_argument("--k", type=int, nargs="*", default=[2, 3, 4, 5])
    ap.add_argument("--mix", type=float, nargs="*", default=[0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0])
    ap.add_argument("--gate", type=float, nargs="*", default=[0.0, 0.1, 0.2, 0.3, 0.5])
    ap.add_argument("--scores-out", type=Path, help="write each dev/held-out query's reader scores here")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--out", type=Path, default=READER_PATH)
    args = ap.parse_args()
    if args.out.suffix != ".npz":
        ap.error(f"--out {args.out}: the reader file is an .npz archive (numpy adds the suffix otherwise)")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)

    r = Retriever()
    tag = digest(args.queries, r)
    mined = None
    if args.mined.is_file():
        got = json.loads(args.mined.read_text())
        mined = got if got.get("digest") == tag else None
    if mined is None:
        t0 = time.time()
        mined = {"digest": tag, **mine(r, args.version, args.queries)}
        args.mined.write_text(json.dumps(mined))
        print(
            f"mined {len(mined['train'])} training and {len(mined['dev'])} dev lists ({time.time() - t0:.0f} s)"
        )
    else:
        for key in r._keys(args.version, None):
            r._collection(key)
    train = [x for x in mined["train"] if not x["held"]]
    held = [x for x in mined["train"] if x["held"]]
    dev = mined["dev"]
    if args.limit:
        train = train[: args.limit]
    easy = sum(1 for x in train if ranks_of([(k[0], k[1]) for k, _ in x["default"]], x["expect"]) == 1)
    hard = sum(1 for x in train if ranks_of([(k[0], k[1]) for k, _ in x["base"]], x["expect"]) == 1)
    print(
        f"train {len(train)} (own section first: {easy / len(train):.3f} with the tower, {hard / len(train):.3f} "
        f"without), held out {len(held)}, dev {len(dev)}",
        flush=True,
    )

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(r.spec.location, device="cpu")
    bert = model[0].auto_model
    for p in bert.parameters():
        p.requires_grad = False
    bert.eval()
    import copy

    layers = torch.nn.ModuleList([copy.deepcopy(bert.encoder.layer[i]) for i in range(args.layers)])
    for p in layers.parameters():
        p.requires_grad = True
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    torch.nn.init.normal_(head.weight, std=0.0 if args.head == "maxsim" else 0.02)
    torch.nn.init.zeros_(head.bias)
    scale = torch.nn.Parameter(torch.tensor(args.scale)) if args.head == "maxsim" else None
    tok = model.tokenizer
    texts = Texts(r, tok, args.max_len)
    cls, sep, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    qids: dict[str, list[int]] = {}

    def query_ids(q: str) -> list[int]:
        got = qids.get(q)
        if got is None:
            got = qids[q] = tok(q, add_special_tokens=False)["input_ids"]
        return got

    def run(pairs: list[tuple[list[int], list[int]]]) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return score_pairs(bert, layers, head, pairs, pad, sep, scale).float()

    def score(recs: list[dict[str, Any]], depth: int) -> list[np.ndarray]:
        layers.eval()
        head.eval()
        out: list[np.ndarray] = []
        with torch.inference_mode():
            for s in range(0, len(recs), 32):
                part = recs[s : s + 32]
                pairs = [
                    pair_ids(cls, sep, query_ids(x["query"]), texts((k[0], k[1])), args.max_len)
                    for x in part
                    for k, _ in x["default"][:depth]
                ]
                got = run(pairs).numpy() if pairs else np.zeros(0)
                at = 0
                for x in part:
                    n = len(x["default"][:depth])
                    out.append(got[at : at + n])
                    at += n
        return out

    def grid(
        recs: list[dict[str, Any]], sc: list[np.ndarray]
    ) -> dict[tuple[int, float, float], dict[str, float]]:
        res: dict[tuple[int, float, float], dict[str, float]] = {}
        lists = [[((k[0], k[1]), v) for k, v in x["default"]] for x in recs]
        base = [ranks_of([k for k, _ in ls], x["expect"]) for x, ls in zip(recs, lists, strict=True)]
        res[(0, 0.0, 0.0)] = {**metrics(base), "ran": 0.0}
        for k in args.k:
            for mix in [*args.mix, math.inf]:
                for gate in args.gate if mix != math.inf else [0.0]:
                    rs, ran = [], 0
                    for x, ls, s in zip(recs, lists, sc, strict=True):
                        kk = min(k, len(ls))
                        if kk < 2 or ls[1][1] < gate:
                            rs.append(ranks_of([key for key, _ in ls], x["expect"]))
                            continue
                        ran += 1
                        lp = np.log(np.maximum([v for _, v in ls[:kk]], 1e-12))
                        new = s[:kk] if mix == math.inf else lp + mix * s[:kk]
                        order = [ls[i][0] for i in np.argsort(-new, kind="stable")] + [
                            key for key, _ in ls[kk:]
                        ]
                        rs.append(ranks_of(order, x["expect"]))
                    res[(k, mix, gate)] = {**metrics(rs), "ran": ran / max(1, len(recs))}
        return res

    def report(tag: str) -> tuple[dict[Any, Any], dict[Any, Any], list[np.ndarray], list[np.ndarray]]:
        t0 = time.time()
        depth = max(args.k)
        sd, sh = score(dev, depth), score(held, depth)
        gd, gh = grid(dev, sd), grid(held, sh)
        print(f"{tag} (scored in {time.time() - t0:.0f} s)")
        b = (0, 0.0, 0.0)
        print(f"  today's order: dev {fmt(gd[b])} | held {fmt(gh[b])}")
        for k in args.k:
            key = (k, math.inf, 0.0)
            print(f"  k={k} reader alone: dev {fmt(gd[key])} | held {fmt(gh[key])}")
        best = sorted((g for g in gd if g[0]), key=lambda g: (-(gd[g]["r1"] + gh[g]["r1"]), -gd[g]["mrr10"]))
        best = best[:8]
        for g in best:
            print(f"  k={g[0]} mix={g[1]} gate={g[2]}: dev {fmt(gd[g])} | held {fmt(gh[g])}")
        sys.stdout.flush()
        return gd, gh, sd, sh

    # --- train ---
    params = [
        {"params": list(layers.parameters()), "lr": args.lr},
        {"params": list(head.parameters()) + ([scale] if scale is not None else []), "lr": args.lr * 10},
    ]
    opt = torch.optim.AdamW(params, weight_decay=0.01)
    steps = max(1, args.epochs * ((len(train) + args.batch - 1) // args.batch))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )
    pools = [negatives(x) for x in train]
    t0 = time.time()
    step = 0
    for epoch in range(1, args.epochs + 1):
        layers.train()
        head.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        total, nb = 0.0, 0
        for s in range(0, len(order), args.batch):
            idx = order[s : s + args.batch]
            pairs, sizes = [], []
            for i in idx:
                x = train[i]
                pool = pools[i][:NEG_POOL]
                negs = rng.sample(pool, min(args.group - 1, len(pool)))
                q = query_ids(x["query"])
                group = [(x["own"][0], x["own"][1]), *negs]
                pairs += [pair_ids(cls, sep, q, texts(k), args.max_len) for k in group]
                sizes.append(len(group))
            logits = run(pairs)
            n = max(sizes)
            table = torch.full((len(idx), n), -1e4)
            at = 0
            for j, m in enumerate(sizes):
                table[j, :m] = logits[at : at + m]
                at += m
            loss = torch.nn.functional.cross_entropy(table, torch.zeros(len(idx), dtype=torch.long))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            total += loss.item()
            nb += 1
            if nb % 100 == 0:
                print(
                    f"  epoch {epoch} step {nb} loss {total / nb:.3f} ({time.time() - t0:.0f} s)", flush=True
                )
        print(f"epoch {epoch} loss {total / max(1, nb):.3f} ({time.time() - t0:.0f} s)", flush=True)
    trained_s = round(time.time() - t0)
    gd, gh, sd, sh = report(f"after {args.epochs} epochs ({trained_s} s)")

    if args.scores_out:
        args.scores_out.write_text(
            json.dumps(
                {
                    "dev": [{**x, "reader": s.tolist()} for x, s in zip(dev, sd, strict=True)],
                    "held": [{**x, "reader": s.tolist()} for x, s in zip(held, sh, strict=True)],
                }
            )
        )
    cands = [g for g in gd if g[0] and g[1] != math.inf]
    best = min(
        cands,
        key=lambda g: (-(gd[g]["r1"] + gh[g]["r1"]), -gd[g]["mrr10"], -gh[g]["mrr10"], g[0], -g[2], g[1]),
    )
    k, mix, gate = best
    print(f"chosen k={k} mix={mix} gate={gate}: dev {fmt(gd[best])} | held {fmt(gh[best])}")
    if args.no_save:
        return
    state = {
        f"layer.{i}.{n}": p.detach().numpy().copy()
        for i in range(args.layers)
        for n, p in layers[i].named_parameters()
    }
    state["head.weight"] = head.weight.detach().numpy().copy()
    state["head.bias"] = head.bias.detach().numpy().copy()
    if scale is not None:
        state["head.scale"] = scale.detach().numpy().reshape(1).copy()
    meta = {
        "head": args.head,
        "layers": args.layers,
        "max_len": args.max_len,
        "k": k,
        "mix": mix,
        "gate": gate,
        "group": args.group,
        "epochs": args.epochs,
        "lr": args.lr,
        "batch": args.batch,
        "seed": args.seed,
        "threads": args.threads,
        "train_queries": len(train),
        "data": tag,
        "trained_s": trained_s,
        **{f"dev_{m}": round(v, 4) for m, v in gd[best].items()},
        **{f"held_{m}": round(v, 4) for m, v in gh[best].items()},
        "dev_today_r1": round(gd[(0, 0.0, 0.0)]["r1"], 4),
        "held_today_r1": round(gh[(0, 0.0, 0.0)]["r1"], 4),
    }
    save_reader(args.out, state, r.spec, meta)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB): {meta}")


def fmt(m: dict[str, float]) -> str:
    return f"r@1 {m['r1']:.3f} r@5 {m['r5']:.3f} mrr {m['mrr10']:.3f} ran {m['ran']:.2f}"


if __name__ == "__main__":
    main()
