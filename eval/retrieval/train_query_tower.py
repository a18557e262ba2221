"""Fine-tune the query side of the dense signal (``ptxrag/indexer/tower.py``) on written training queries.

    PTXRAG_HOME=<home with 9.1 and the pack indexed> python eval/retrieval/train_query_tower.py \
        --queries eval/retrieval/training/*.jsonl [--layers 6] [--epochs 5] [--check-dev]

What it learns: new weights for the top ``--layers`` transformer layers of all-MiniLM-L6-v2 on the query
side only. The chunk embeddings stay as indexed (the base model), so the index does not change: a training
query must rank its own section first among every section of the manual and the knowledge pack (a section
scores its best chunk; softmax over sections at temperature ``--tau``). Every other section is a negative,
siblings included, which is where the base model confuses most.

Training data: ``eval/retrieval/training/*.jsonl``, queries written for this purpose section by section by
LLM sessions that read only the manual's sections and the pack's documents, never the evaluation sets
(README beside the data). A hashed 10% of them is held out to report. ``--check-dev`` also reports
dense-only recall on the dev split of the packaged evaluation set after each epoch (what the settings are
chosen on); the test split is never opened here.

Deterministic on CPU for a given seed (batch order from a seeded generator)."""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ptxrag.indexer import Retriever
from ptxrag.indexer.evaluation import answers, load_queries, packaged_set, select
from ptxrag.indexer.retriever import dense_query
from ptxrag.indexer.schema import MANUAL_SOURCE
from ptxrag.indexer.tower import TOWER_PATH, save_tower


def held_out(text: str) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 10 == 0


#: every evaluation query file: a training query with the same text (case and spacing aside) is dropped
EVAL_FILES = [
    *sorted((Path(__file__).resolve().parents[2] / "ptxrag" / "indexer" / "evalsets").glob("*.jsonl")),
    *sorted(Path(__file__).resolve().parents[1].glob("fresh*/ptx-isa-*.jsonl")),  # every fresh held-out set
    *sorted((Path(__file__).resolve().parents[3] / "shared" / "eval").glob("*.jsonl")),
]


def eval_texts(files: list[Path] = EVAL_FILES) -> set[str]:
    """The evaluation queries' texts, lower case, spacing normalised (only the ``query`` field is read)."""
    out: set[str] = set()
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.add(" ".join(str(json.loads(line).get("query", "")).split()).lower())
    return out


def read_training(paths: list[Path]) -> list[tuple[str, str]]:
    """(query, section) pairs, each query text once, none that is also an evaluation query."""
    return [(q, section) for q, section, _ in read_training_rounds(paths)]


def read_training_rounds(paths: list[Path]) -> list[tuple[str, str, str]]:
    """``read_training`` with each query's round (``round``; the compiler-error file has none and is
    its own round, "errors"): no round's writers saw another round's queries."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = eval_texts()
    for p in paths:
        for line in p.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            d = json.loads(line)
            q = " ".join(str(d["query"]).split())
            if q.lower() in seen:
                continue
            seen.add(q.lower())
            out.append((q, str(d["section"]).strip().rstrip("."), str(d.get("round") or "errors")))
    return out


@dataclass(frozen=True)
class WrittenSearch:
    """A written training query as the learned parts' trainers search with it."""

    query: str
    section: str
    round: str
    held: bool
    """in the query tower's hashed hold-out (``held_out``)"""
    sources: list[str]
    """a manual section's query searches the manual; a pack document's, the manual and its source"""
    own: tuple[str, str]
    """(collection key, number) of the section or document it was written for"""


def written_searches(r: Retriever, version: str, paths: list[Path]) -> list[WrittenSearch]:
    """``read_training_rounds`` for the sections and documents ``r`` has indexed (others are left out).
    Search each with ``memory_without=search.round``: the query memory holds the query itself and the
    queries written beside it in its round."""
    manual_key = r._keys(version, [MANUAL_SOURCE])[0]
    manual = set(r._collection(manual_key).row_of)
    pack: dict[str, str] = {}
    for source in r.sources():
        if source != MANUAL_SOURCE:
            for number in r._collection(r._keys(None, [source])[0]).row_of:
                pack.setdefault(number, source)
    out = []
    for query, section, round_ in read_training_rounds(paths):
        if section in manual:
            sources, own = [MANUAL_SOURCE], (manual_key, section)
        elif section in pack:
            sources, own = [MANUAL_SOURCE, pack[section]], (r._keys(None, [pack[section]])[0], section)
        else:
            continue
        out.append(WrittenSearch(query, section, round_, held_out(query), sources, own))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, nargs="+", required=True)
    ap.add_argument("--version", default="9.1")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check-dev", action="store_true")
    ap.add_argument("--all", action="store_true", help="train on the held-out 10%% too (the final fit)")
    ap.add_argument("--out", type=Path, default=TOWER_PATH)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    r = Retriever()
    keys = r._keys(args.version, None)
    vec_parts, owner_parts, sec_keys = [], [], []
    index_of: dict[tuple[str, str], int] = {}
    manual_rows: list[int] = []
    for key in keys:
        loaded = r._collection(key)
        vecs, rows = r._vectors(loaded)
        base = len(sec_keys)
        for s in loaded.sections:
            index_of[(key, s.number)] = len(sec_keys)
            if key.startswith(MANUAL_SOURCE):
                manual_rows.append(len(sec_keys))
            sec_keys.append((key, s.number))
        vec_parts.append(np.asarray(vecs, dtype=np.float32))
        owner_parts.append(np.asarray(rows, dtype=np.int64) + base)
    chunks = torch.from_numpy(np.concatenate(vec_parts))
    owner = torch.from_numpy(np.concatenate(owner_parts))
    n_sec = len(sec_keys)
    by_number: dict[str, int] = {}
    for (key, number), i in index_of.items():
        if key.startswith(MANUAL_SOURCE) or number not in by_number:
            by_number.setdefault(number, i)

    data = read_training(args.queries)
    missing = sorted({s for _, s in data if s not in by_number})
    if missing:
        print(
            f"skipping {sum(1 for _, s in data if s in missing)} queries of unknown sections: {missing[:10]}"
        )
    pairs = [(q, by_number[s]) for q, s in data if s in by_number]
    train = [p for p in pairs if args.all or not held_out(p[0])]
    held = [] if args.all else [p for p in pairs if held_out(p[0])]
    print(
        f"{len(pairs)} queries for {len({t for _, t in pairs})} of {n_sec} sections; train {len(train)}, held {len(held)}"
    )

    dev = []
    if args.check_dev:
        dev = [q for q in select(load_queries(packaged_set(args.version)), "dev") if not q.contract]

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(r.spec.location, device="cpu")
    bert = model[0].auto_model
    n_layers = len(bert.encoder.layer)
    tuned = list(range(n_layers - args.layers, n_layers))
    for p in model.parameters():
        p.requires_grad = False
    params = []
    for i in tuned:
        for p in bert.encoder.layer[i].parameters():
            p.requires_grad = True
            params.append(p)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = args.epochs * ((len(train) + args.batch - 1) // args.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )

    def encode(texts: list[str]) -> torch.Tensor:
        feats = model.tokenize([dense_query(t) for t in texts])
        out = model(feats)["sentence_embedding"]
        return torch.nn.functional.normalize(out, dim=-1)

    def section_scores(q: torch.Tensor) -> torch.Tensor:
        sims = q @ chunks.T
        out = torch.full((q.shape[0], n_sec), -2.0)
        return out.scatter_reduce(1, owner.expand(q.shape[0], -1), sims, reduce="amax")

    def recall(items: list[tuple[str, int]]) -> tuple[float, float]:
        model.eval()
        r1 = r5 = 0
        with torch.inference_mode():
            for s in range(0, len(items), 128):
                part = items[s : s + 128]
                top = section_scores(encode([q for q, _ in part])).topk(5, dim=1).indices
                for (_, t), row in zip(part, top.tolist(), strict=True):
                    r1 += row[0] == t
                    r5 += t in row
        return r1 / max(1, len(items)), r5 / max(1, len(items))

    manual_idx = torch.tensor(manual_rows)

    def dev_recall() -> tuple[float, float]:
        model.eval()
        r1 = r5 = 0
        with torch.inference_mode():
            for s in range(0, len(dev), 128):
                part = dev[s : s + 128]
                sc = section_scores(encode([q.query for q in part]))[:, manual_idx]
                top = sc.topk(5, dim=1).indices
                for q, row in zip(part, top.tolist(), strict=True):
                    nums = [sec_keys[manual_rows[i]][1] for i in row]
                    ok = [any(answers(n, e) for e in q.expect) for n in nums]
                    r1 += ok[0]
                    r5 += any(ok)
        return r1 / max(1, len(dev)), r5 / max(1, len(dev))

    def report(tag: str) -> dict[str, float]:
        out: dict[str, float] = {}
        if held:
            out["held_r1"], out["held_r5"] = recall(held)
        if dev:
            out["dev_r1"], out["dev_r5"] = dev_recall()
        print(tag, " ".join(f"{k} {v:.3f}" for k, v in out.items()), flush=True)
        return out

    report("epoch 0 (base model)")
    gen = torch.Generator().manual_seed(args.seed)
    targets = torch.tensor([t for _, t in train])
    t0 = time.time()
    last: dict[str, float] = {}
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=gen).tolist()
        total = 0.0
        for b, s in enumerate(range(0, len(order), args.batch)):
            idx = order[s : s + args.batch]
            q = encode([train[i][0] for i in idx])
            loss = torch.nn.functional.cross_entropy(section_scores(q) / args.tau, targets[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
            if b % 50 == 0:
                print(
                    f"  epoch {epoch} batch {b} loss {loss.item():.3f} ({time.time() - t0:.0f} s)", flush=True
                )
        last = report(f"epoch {epoch} loss {total / max(1, len(order) // args.batch):.3f}")

    state = {
        f"layer.{i}.{name}": p.detach().numpy().copy()
        for i in tuned
        for name, p in bert.encoder.layer[i].named_parameters()
    }
    meta = {
        "layers": tuned,
        "epochs": args.epochs,
        "lr": args.lr,
        "batch": args.batch,
        "tau": args.tau,
        "seed": args.seed,
        "train_queries": len(train),
        "sections": len({t for _, t in train}),
        "data": hashlib.sha256("\n".join(f"{q}\t{t}" for q, t in pairs).encode()).hexdigest()[:16],
        "trained_s": round(time.time() - t0),
        **{k: round(v, 4) for k, v in last.items()},
    }
    save_tower(args.out, state, r.spec, meta)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB): {meta}")


if __name__ == "__main__":
    main()
