#!/usr/bin/env python3
"""Check the fresh held-out PTX ISA 9.1 retrieval set.

Reads only the two files of this folder and the manual folder; never runs the retriever.

Checks:
  * every line of ptx-isa-9.1-fresh.jsonl parses and has id/query/expect/category/note;
  * ids are unique; no two queries are the same (case and whitespace folded);
  * every expect entry is a section number that some heading of the manual carries
    (the page's title line "# N. ..." or a numbered in-page heading "### N. [...]");
  * categories are the known ones; prints counts by category and how many rows list two sections;
  * every row of ptx-isa-9.1-fresh-errors-sources.jsonl names a compiler-error row, and every
    compiler-error row has a source.

Usage: python3 eval/fresh/check_fresh.py [--manual DIR]
Exit status 0 when all checks pass, 1 otherwise.
"""

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SET = HERE / "ptx-isa-9.1-fresh.jsonl"
SOURCES = HERE / "ptx-isa-9.1-fresh-errors-sources.jsonl"
CATEGORIES = {
    "concept": 60,
    "which": 30,
    "agent": 35,
    "compiler-error": 30,
    "memory/ordering": 20,
    "state/types": 15,
    "tensormap/tma": 10,
    "history": 20,
}
# "# 9.7.1.1. Integer ..."  or  "###### 9.7.15.5.1.2.2. [Matrix Descriptor Format](...)"
HEADING = re.compile(r"^#+\s+\[?(\d+(?:\.\d+)*)\.\s")


def manual_sections(manual: Path):
    title, inpage = set(), set()
    for md in manual.rglob("*.md"):
        with md.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                m = HEADING.match(line)
                if m:
                    (title if i == 0 else inpage).add(m.group(1))
    return title, inpage


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--manual", default="/work/shared/corpus/ptx-isa-9.1")
    args = ap.parse_args()
    manual = Path(args.manual)
    if not manual.is_dir():
        print(f"manual folder not found: {manual}")
        return 1
    title, inpage = manual_sections(manual)
    problems = []
    rows = []
    for n, line in enumerate(SET.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {n}: does not parse: {e}")
            continue
        missing = {"id", "query", "expect", "category", "note"} - set(row)
        if missing:
            problems.append(f"line {n}: missing fields {sorted(missing)}")
            continue
        if not isinstance(row["expect"], list) or not 1 <= len(row["expect"]) <= 2:
            problems.append(f"{row['id']}: expect must list one or two sections")
        if row["category"] not in CATEGORIES:
            problems.append(f"{row['id']}: unknown category {row['category']!r}")
        if not row["query"].strip():
            problems.append(f"{row['id']}: empty query")
        rows.append(row)

    ids = Counter(r["id"] for r in rows)
    problems += [f"duplicate id {i}" for i, c in ids.items() if c > 1]
    norm = Counter(" ".join(r["query"].lower().split()) for r in rows)
    problems += [f"duplicate query: {q!r}" for q, c in norm.items() if c > 1]

    only_inpage = []
    for r in rows:
        if len(set(r["expect"])) != len(r["expect"]):
            problems.append(f"{r['id']}: the same section listed twice")
        for sec in r["expect"]:
            if sec in title:
                continue
            if sec in inpage:
                only_inpage.append((r["id"], sec))
            else:
                problems.append(f"{r['id']}: expect {sec} is not a section heading of the manual")

    err_ids = {r["id"] for r in rows if r["category"] == "compiler-error"}
    src_ids = set()
    for n, line in enumerate(SOURCES.read_text(encoding="utf-8").splitlines(), 1):
        try:
            s = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"sources line {n}: does not parse: {e}")
            continue
        if not {"id", "source", "command"} <= set(s):
            problems.append(f"sources line {n}: needs id, source, command")
            continue
        if s["id"] not in err_ids:
            problems.append(f"sources line {n}: {s['id']} is not a compiler-error row")
        src_ids.add(s["id"])
    problems += [f"{i}: compiler-error row without a source" for i in sorted(err_ids - src_ids)]

    counts = Counter(r["category"] for r in rows)
    print(f"{len(rows)} queries")
    for cat, want in CATEGORIES.items():
        print(f"  {cat:16s} {counts.get(cat, 0):4d}  (planned {want})")
    print(f"rows listing two sections: {sum(len(r['expect']) == 2 for r in rows)}")
    if only_inpage:
        print("expect numbers found only in a numbered in-page heading (page title is an anchor name):")
        for i, sec in only_inpage:
            print(f"  {i}: {sec}")
    if problems:
        print(f"{len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("all checks pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
