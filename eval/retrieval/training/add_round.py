"""Append one round of written training queries (``{"section", "query", "style"}`` JSONL files, one per slice
of the manual or the pack) to ``ptx-isa-9.1-written.jsonl`` / ``pack-written.jsonl`` with ``round`` set.

    python eval/retrieval/training/add_round.py --round r5 /work/qgen/out5/*.jsonl

A row is kept only when it parses, its query is 2-400 characters, its section is a section of the 9.1
manual (``../shared/corpus/ptx-isa-9.1``) or a knowledge-pack document id, and its query text (case and
spacing aside) is neither already in the training files nor an evaluation query. What was dropped, and why,
is printed."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from train_query_tower import eval_texts  # noqa: E402

from ptxrag.indexer.loaders import load_manual  # noqa: E402
from ptxrag.indexer.pack import pack_documents  # noqa: E402

MANUAL_FILE = HERE / "ptx-isa-9.1-written.jsonl"
PACK_FILE = HERE / "pack-written.jsonl"


def norm(q: str) -> str:
    return " ".join(q.split()).lower()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--round", required=True, help="the round label written into each row, e.g. r5")
    ap.add_argument(
        "--manual", type=Path, default=HERE.parents[2].parent / "shared" / "corpus" / "ptx-isa-9.1"
    )
    args = ap.parse_args()
    manual = {s.number for s in load_manual(args.manual, version="9.1").sections}
    pack = {d.doc_id for d in pack_documents()}
    seen = eval_texts()
    evals = len(seen)
    for f in (MANUAL_FILE, PACK_FILE):
        seen |= {
            norm(json.loads(x)["query"]) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()
        }
    dropped: Counter[str] = Counter()
    rows: dict[Path, list[str]] = {MANUAL_FILE: [], PACK_FILE: []}
    for f in args.files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                section, query, style = (
                    str(d["section"]).strip().rstrip("."),
                    str(d["query"]).strip(),
                    str(d["style"]),
                )
            except (ValueError, KeyError, TypeError):
                dropped[f"{f.name}: unparsable"] += 1
                continue
            key = norm(query)
            if not 2 <= len(query) <= 400:
                dropped["query length"] += 1
            elif section not in manual and section not in pack:
                dropped[f"unknown section {section}"] += 1
            elif key in seen:
                dropped["duplicate or evaluation query"] += 1
            else:
                seen.add(key)
                row = {"section": section, "query": query, "style": style, "round": args.round}
                rows[PACK_FILE if section in pack else MANUAL_FILE].append(
                    json.dumps(row, ensure_ascii=False)
                )
    for path, new in rows.items():
        if new:
            with path.open("a", encoding="utf-8") as out:
                out.write("\n".join(new) + "\n")
        print(f"{path.name}: +{len(new)} rows")
    print(f"compared with {evals} evaluation queries; dropped: {dict(dropped) or 'none'}")


if __name__ == "__main__":
    main()
