"""Pool several held-out sets' scores and put a bootstrap interval on them (one split of 252 queries moves by
about +-0.045 recall@1 at 95%, so a goal two queries away is inside the noise of any one set).

    ptxrag eval-retrieval --set 9.1 --split test --ablation default --ablation with-reader --json > test.json
    ptxrag eval-retrieval eval/fresh/ptx-isa-9.1-fresh.jsonl --ablation default --ablation with-reader \
        --json > fresh.json
    python eval/retrieval/pooled.py test.json fresh.json ... [--label default] [--against with-reader]

Reads ``eval-retrieval --json`` outputs (one evaluation or a list of them, one per ablation). For ``--label``,
per set and pooled: recall@1 and recall@5 with a 95% percentile interval from a bootstrap that resamples
queries within each set (so every set keeps its size); with ``--against``, the paired difference of
recall@1 between the two labels, resampled the same way (queries a label got right that the other did not,
and the reverse). Only reports; nothing is chosen here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _ranks(path: Path, label: str) -> list[int | None]:
    data = json.loads(path.read_text(encoding="utf-8"))
    evals = data if isinstance(data, list) else [data]
    for ev in evals:
        if (ev.get("label") or "default") == label:
            return [o.get("rank") for o in ev["outcomes"]]
    have = ", ".join(str(ev.get("label") or "default") for ev in evals)
    raise SystemExit(f"{path}: no evaluation labelled {label!r} (has: {have})")


def _hits(ranks: list[int | None], k: int) -> np.ndarray:
    return np.array([r is not None and r <= k for r in ranks], dtype=float)


def _interval(sets: list[np.ndarray], rng: np.random.Generator, n: int) -> tuple[float, float, float]:
    """The pooled mean of per-query values and its bootstrap 95% interval, resampling within each set."""
    total = sum(len(s) for s in sets)
    point = sum(s.sum() for s in sets) / total
    draws = np.zeros(n)
    for s in sets:
        idx = rng.integers(0, len(s), size=(n, len(s)))
        draws += s[idx].sum(axis=1)
    draws /= total
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(point), float(lo), float(hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, nargs="+", help="eval-retrieval --json outputs, one per set")
    ap.add_argument("--label", default="default")
    ap.add_argument("--against", help="another label: the paired recall@1 difference label - against")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = {f: _ranks(f, args.label) for f in args.files}
    width = max(len(f.stem) for f in args.files)
    print(f"{args.label}: recall@1 and recall@5 with bootstrap 95% intervals ({args.resamples} resamples)")
    for f, ranks in rows.items():
        r1 = _interval([_hits(ranks, 1)], rng, args.resamples)
        r5 = _interval([_hits(ranks, 5)], rng, args.resamples)
        print(
            f"  {f.stem:{width}} {len(ranks):4} queries: recall@1 {r1[0]:.3f} [{r1[1]:.3f}, {r1[2]:.3f}]  "
            f"recall@5 {r5[0]:.3f} [{r5[1]:.3f}, {r5[2]:.3f}]"
        )
    total = sum(len(r) for r in rows.values())
    r1 = _interval([_hits(r, 1) for r in rows.values()], rng, args.resamples)
    r5 = _interval([_hits(r, 5) for r in rows.values()], rng, args.resamples)
    print(
        f"  {'pooled':{width}} {total:4} queries: recall@1 {r1[0]:.3f} [{r1[1]:.3f}, {r1[2]:.3f}]  "
        f"recall@5 {r5[0]:.3f} [{r5[1]:.3f}, {r5[2]:.3f}]"
    )
    if args.against:
        diffs, wins, losses = [], 0, 0
        for f, ranks in rows.items():
            other = _ranks(f, args.against)
            if len(other) != len(ranks):
                raise SystemExit(f"{f}: {args.label} and {args.against} scored different queries")
            a, b = _hits(ranks, 1), _hits(other, 1)
            wins += int(((a == 1) & (b == 0)).sum())
            losses += int(((a == 0) & (b == 1)).sum())
            diffs.append(a - b)
        d = _interval(diffs, rng, args.resamples)
        print(
            f"  {args.label} - {args.against}, recall@1 pooled: {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] "
            f"({wins} first places only {args.label} has, {losses} only {args.against})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
