"""How often an independent second labeller's first section answers a query as the set's own label does.

    python eval/second-labels/agreement.py ptxrag/indexer/evalsets/ptx-isa-9.1.jsonl \\
        eval/second-labels/ptx-isa-9.1-test-labels.jsonl
    python eval/second-labels/agreement.py eval/fresh/ptx-isa-9.1-fresh.jsonl \\
        eval/second-labels/ptx-isa-9.1-fresh-labels.jsonl

A second label agrees when its section is an expected one or a descendant of one (the scoring rule of
``ptxrag eval-retrieval``). Printed: agreement of the first section, of any section given, among the labels
marked sure, and per category."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def answers(got: str, expected: str) -> bool:
    return got == expected or got.startswith(expected + ".")


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    rows = [json.loads(x) for x in Path(sys.argv[1]).read_text(encoding="utf-8").splitlines() if x.strip()]
    own = {r["id"]: r for r in rows}
    n = first = anyone = sure = sure_first = 0
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for line in Path(sys.argv[2]).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        expect = own[d["id"]].get("expect") or []
        secs = [str(s).strip().rstrip(".") for s in d.get("sections") or []]
        if not secs:
            continue
        n += 1
        ok = any(answers(secs[0], e) for e in expect)
        first += ok
        anyone += any(answers(s, e) for s in secs for e in expect)
        if d.get("sure"):
            sure += 1
            sure_first += ok
        cat = per[str(own[d["id"]].get("category"))]
        cat[0] += 1
        cat[1] += ok
    print(
        f"{n} labelled: first section agrees {first / n:.3f}, any section {anyone / n:.3f}, "
        f"sure ({sure}) {sure_first / max(sure, 1):.3f}"
    )
    print("by category:", ", ".join(f"{k} {v[1]}/{v[0]}" for k, v in sorted(per.items())))


if __name__ == "__main__":
    main()
