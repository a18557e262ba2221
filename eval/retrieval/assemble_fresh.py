"""Assemble a fresh held-out set from its writers' files, before it is ever scored.

    python eval/retrieval/assemble_fresh.py eval/fresh4/ptx-isa-9.1-fresh4.jsonl /work/fresh4/fresh4-*.jsonl \
        --also eval/retrieval/ptxas-probe/*.jsonl

Drops every row whose text equals a training query (eval/retrieval/training/, read raw: the packaged query
memory holds every row of it) or a query of an ``--also`` file (tuning data), compared with compiler
locations taken out, case and spacing aside; adds ``train_jaccard``, the row's highest word-set Jaccard with
any training query. Prints what it dropped; reads no retriever and no score.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ptxrag.indexer.text import strip_compiler_locations

TRAINING = Path(__file__).resolve().parent / "training"
_WORD = re.compile(r"[a-z0-9_.%:']+")


def norm(text: str) -> str:
    return " ".join(strip_compiler_locations(text).lower().split())


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(norm(text)))


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("writers", type=Path, nargs="+", help="the writers' JSON-lines files, in order")
    ap.add_argument(
        "--also", type=Path, nargs="*", default=[], help="tuning sets whose texts are dropped too"
    )
    args = ap.parse_args(argv)

    training = [str(r["query"]) for p in sorted(TRAINING.glob("*.jsonl")) for r in read_rows(p)]
    taken = {norm(q): "training" for q in training}
    for p in args.also:
        for r in read_rows(p):
            taken.setdefault(norm(str(r["query"])), p.name)
    # an inverted index keeps the Jaccard scan to the training queries sharing a word
    train_words = [words(q) for q in training]
    by_word: dict[str, list[int]] = {}
    for i, ws in enumerate(train_words):
        for w in ws:
            by_word.setdefault(w, []).append(i)

    kept: list[dict] = []
    seen: set[str] = set()
    for path in args.writers:
        for row in read_rows(path):
            key = norm(str(row["query"]))
            if key in taken or key in seen:
                why = f"equals a query of {taken[key]}" if key in taken else "repeats an earlier row"
                print(f"dropped {row['id']}: text {why}: {row['query'][:90]!r}")
                continue
            seen.add(key)
            ws = words(row["query"])
            near = {i for w in ws for i in by_word.get(w, ())}
            best = max((len(ws & train_words[i]) / len(ws | train_words[i]) for i in near), default=0.0)
            kept.append({**row, "train_jaccard": round(best, 3)})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
    high = sum(r["train_jaccard"] >= 0.6 for r in kept)
    print(f"{len(kept)} rows -> {args.out} ({high} with train_jaccard >= 0.6)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
