"""Benchmark: index the PTX ISA 9.1 manual from scratch, re-index it unchanged, time warm queries and score
retrieval on the dev set and on the held-out set, with ablations of the ranking.

Targets (issue 5, 2-core machine): first index of the whole 9.1 manual <= 90 s; unchanged re-index <= 5 s;
warm query median <= 20 ms; dev recall@5 = 1.0 and recall@1 >= 0.9.

The two index timings run ``ptxrag index`` as a user would (a fresh process: imports and model load
included). Query timings are in-process, distinct queries, query-embedding cache cleared.

Usage: python benchmarks/retrieval_bench.py [--manual DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def _machine() -> str:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in ln
        ),
        platform.processor(),
    )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs ({cpu}), load average {load}, Python {platform.python_version()}"


def _run_index(home: Path) -> tuple[float, dict]:
    env = {**os.environ, "PTXRAG_HOME": str(home), "HF_HUB_OFFLINE": "1", "OPENBLAS_NUM_THREADS": "1"}
    cli = Path(sys.executable).with_name("ptxrag")
    t0 = time.perf_counter()
    out = subprocess.run([str(cli), "index", "--json"], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--manual", type=Path, default=SHARED / "corpus" / "ptx-isa-9.1")
    ap.add_argument("--dev", type=Path, default=SHARED / "eval" / "retrieval-dev.jsonl")
    ap.add_argument("--heldout", type=Path, default=REPO / "tests" / "fixtures" / "retrieval-heldout.jsonl")
    ap.add_argument("--out", type=Path, help="also write the report here")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# retrieval benchmark {date.today()}")
    say(f"machine: {_machine()}")
    with tempfile.TemporaryDirectory(prefix="ptxrag-bench-") as tmp:
        home = Path(tmp)
        os.environ["PTXRAG_HOME"] = str(home)
        from ptxrag.indexer import FusionWeights, Retriever, add_manual, evaluate, load_queries

        t0 = time.perf_counter()
        rec = add_manual(args.manual, version="9.1", home=home)
        say(f"corpus add ptx-isa 9.1 (parse {rec.sections} sections): {time.perf_counter() - t0:.1f} s")

        first_s, first = _run_index(home)
        built = {c["source"]: c for c in first["collections"]}
        manual = built["ptx-isa"]
        say(
            f"first `ptxrag index` (fresh process; 9.1 manual + knowledge pack): {first_s:.1f} s wall; "
            f"9.1 manual: {manual['chunks']} chunks, embedding {manual['embed_s']:.1f} s, collection "
            f"{manual['wall_s']:.1f} s"
        )
        others = [c for c in first["collections"] if c["source"] != "ptx-isa"]
        say(
            "  knowledge pack: "
            + ", ".join(f"{c['source']} {c['chunks']} chunks {c['wall_s']:.1f} s" for c in others)
        )
        manual_only_s = first_s - sum(c["wall_s"] for c in others)
        say(
            f"  first index of the 9.1 manual (wall minus knowledge collections): {manual_only_s:.1f} s "
            f"(target <= 90 s: {'met' if manual_only_s <= 90 else 'MISSED'})"
        )
        again_s, again = _run_index(home)
        actions = sorted({c["action"] for c in again["collections"]})
        say(
            f"unchanged re-index `ptxrag index` (fresh process): {again_s:.2f} s, actions {actions} "
            f"(target <= 5 s: {'met' if again_s <= 5 and actions == ['unchanged'] else 'MISSED'})"
        )

        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")
        retriever = Retriever(home)
        dev = load_queries(args.dev)
        held = load_queries(args.heldout)
        for q in ("warm-up", "mbarrier", "wgmma"):
            retriever.search(q, 5)
        for label, srcs in (("all sources", None), ("manual only", ["ptx-isa"])):
            retriever._query_cache.clear()
            times = []
            for q in [*dev, *held]:
                t = time.perf_counter()
                retriever.search(q.query, 5, sources=srcs)
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            med = statistics.median(times)
            say(
                f"warm query ({label}, {len(times)} distinct queries, k=5): median {med:.1f} ms, "
                f"p90 {times[int(0.9 * len(times))]:.1f} ms (target median <= 20 ms: "
                f"{'met' if med <= 20 else 'MISSED'})"
            )

        say("")
        say("quality (manual only, top 10):")
        for name, qs, path in (("dev", dev, args.dev), ("held-out", held, args.heldout)):
            retriever._query_cache.clear()
            ev = evaluate(retriever, qs, file=str(path))
            say(
                f"  {name:8} {ev.queries:3} queries: recall@1 {ev.recall_at_1:.3f}  recall@5 {ev.recall_at_5:.3f}  "
                f"recall@10 {ev.recall_at_10:.3f}  MRR@10 {ev.mrr_at_10:.3f}"
            )
            for o in ev.misses:
                say(f"      rank {o.rank or '-'}: {o.query!r} expected {o.expect} got {o.top[:3]}")
            kinds = sorted({o.kind for o in ev.outcomes if o.kind})
            for kind in kinds:
                sub = [o for o in ev.outcomes if o.kind == kind]
                r1 = sum(o.rank == 1 for o in sub) / len(sub)
                r5 = sum(o.rank is not None and o.rank <= 5 for o in sub) / len(sub)
                say(f"      {kind:8} {len(sub):3} queries: recall@1 {r1:.3f} recall@5 {r5:.3f}")
        dev_ev = evaluate(retriever, dev)
        say(
            f"  dev targets: recall@5 = 1.0 {'met' if dev_ev.recall_at_5 == 1.0 else 'MISSED'}; "
            f"recall@1 >= 0.9 {'met' if dev_ev.recall_at_1 >= 0.9 else 'MISSED'}"
        )

        say("")
        say("ablations (same index; recall@1 / recall@5 / MRR@10 on dev | held-out):")
        variants = {
            "full (RRF k=10 of BM25 sections, BM25 titles, dense; names; stubs x0.75)": FusionWeights(),
            "no instruction-name bonus": FusionWeights(instruction=0.0),
            "no stub demotion": FusionWeights(stub_factor=1.0),
            "BM25 sections only": FusionWeights(title=0.0, dense=0.0, instruction=0.0, stub_factor=1.0),
            "dense only": FusionWeights(lexical=0.0, title=0.0, instruction=0.0, stub_factor=1.0),
            "plain RRF k=60, BM25 sections + dense": FusionWeights(
                title=0.0, rrf_k=60, instruction=0.0, stub_factor=1.0
            ),
        }
        for label, weights in variants.items():
            r = Retriever(home, weights=weights)
            r._embedder = retriever._embedder
            parts = []
            for qs in (dev, held):
                ev = evaluate(r, qs)
                parts.append(f"{ev.recall_at_1:.2f} / {ev.recall_at_5:.2f} / {ev.mrr_at_10:.2f}")
            say(f"  {label:72} {parts[0]} | {parts[1]}")
        say("")
        say(f"machine at the end: {_machine()}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
