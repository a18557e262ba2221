"""Build the packaged retrieval evaluation sets (``ptxrag/indexer/evalsets/ptx-isa-<version>.jsonl``) from
the hand-written queries (``queries-<version>.txt``) and, for 9.1, the compiler errors harvested by
``harvest_compiler_errors.py`` (``compiler-errors.json``).

Every record: ``id``, ``query``, ``expect`` (section numbers; a descendant of one also answers), ``category``,
``split`` (``dev`` or ``test``: the first 8 hex digits of sha256(query) modulo 100, below 40 is dev, so the
split depends on the query text only and never on results), ``title_overlap`` (the share of the query's
content tokens that occur in the expected sections' breadcrumbs, titles and defined names: how much the
query's wording leans on the titles) and, for queries that a knowledge-pack contract answers, ``contract``
(the contract document id). Every expected section is checked to exist in that version of the manual, and
every contract id in the knowledge pack.

Run from the repository root: ``python eval/retrieval/build_evalset.py [--corpus ../shared/corpus]``."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from ptxrag.indexer.chunking import breadcrumb
from ptxrag.indexer.loaders import load_manual
from ptxrag.indexer.text import tokenize

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = REPO / "ptxrag" / "indexer" / "evalsets"
DEV_PERCENT = 40


def split_of(query: str) -> str:
    return (
        "dev"
        if int(hashlib.sha256(query.encode("utf-8")).hexdigest()[:8], 16) % 100 < DEV_PERCENT
        else "test"
    )


def read_hand(path: Path) -> list[dict[str, object]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) not in (3, 4):
            raise SystemExit(f"{path}:{n}: expected 'category | expect | query [| contract]'")
        rec: dict[str, object] = {
            "query": parts[2],
            "expect": [e.strip() for e in parts[1].split(",")],
            "category": parts[0],
        }
        if len(parts) == 4:
            rec["contract"] = parts[3]
        out.append(rec)
    return out


def read_compiler_errors(path: Path) -> list[dict[str, object]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        {
            "query": "\n".join(k["errors"][:3]),
            "expect": k["expect"],
            "category": "compiler-error",
            "kernel": k["kernel"],
        }
        for k in data["kernels"]
    ]


def overlap(query: str, expect: list[str], by_number: dict) -> float:  # type: ignore[type-arg]
    q = {t for t in tokenize(query) if not t.isdigit()}
    if not q:
        return 0.0
    titles: set[str] = set()
    for e in expect:
        s = by_number[e]
        titles |= set(tokenize(f"{breadcrumb(s, by_number, 2)} {' '.join(s.defines)}"))
    return round(len(q & titles) / len(q), 3)


def build(version: str, corpus: Path, contracts: set[str]) -> list[dict[str, object]]:
    manual = load_manual(corpus / f"ptx-isa-{version}", version=version)
    by_number = manual.by_number()
    records = read_hand(HERE / f"queries-{version}.txt")
    errors = HERE / "compiler-errors.json"
    if version == "9.1" and errors.is_file():
        records += read_compiler_errors(errors)
    seen: set[str] = set()
    out = []
    for i, rec in enumerate(records, start=1):
        q = str(rec["query"])
        if q in seen:
            raise SystemExit(f"{version}: query given twice: {q!r}")
        seen.add(q)
        expect = list(rec["expect"])  # type: ignore[call-overload]
        missing = [e for e in expect if e not in by_number]
        if missing:
            raise SystemExit(f"{version}: {q!r} expects sections {missing} that the manual lacks")
        if "contract" in rec and rec["contract"] not in contracts:
            raise SystemExit(f"{version}: {q!r} names unknown contract {rec['contract']!r}")
        out.append(
            {
                "id": f"{version}-{i:03d}",
                **rec,
                "split": split_of(q),
                "title_overlap": overlap(q, expect, by_number),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    args = ap.parse_args()
    from ptxrag.corpus import iter_documents

    contracts = {d.doc_id for d in iter_documents(["contracts"])}
    OUT.mkdir(parents=True, exist_ok=True)
    for version in ("9.1", "9.0"):
        recs = build(version, args.corpus, contracts)
        path = OUT / f"ptx-isa-{version}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        cats: dict[str, int] = {}
        for r in recs:
            cats[str(r["category"])] = cats.get(str(r["category"]), 0) + 1
        dev = sum(1 for r in recs if r["split"] == "dev")
        mean = sum(float(r["title_overlap"]) for r in recs) / len(recs)  # type: ignore[arg-type]
        print(
            f"{path}: {len(recs)} queries ({dev} dev, {len(recs) - dev} test), mean title overlap {mean:.2f}, {cats}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
