"""Benchmark: one full GPU evaluation of a small kernel, per stage, and a compile-cache hit.

Targets (issue 2): median end to end <= 15 s on the H200; compile-cache hit < 0.2 s.
Usage: python benchmarks/sandbox_bench.py [--runs 5] [--task warp-reduce-redux]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from ptxrag.sandbox import Sandbox
from ptxrag.sandbox.compile import compile_candidate
from ptxrag.tasks import load_task


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--task", default="warp-reduce-redux")
    args = ap.parse_args()
    task = load_task(args.task)
    src = task.solution_source()
    sb = Sandbox()
    print(f"# sandbox benchmark {date.today()} task={task.id} gpu={sb.gpu.label if sb.gpu else 'none'}")
    # cold compile (fresh cache dir) vs cache hit
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        cold = compile_candidate(src, task.gencode, out_dir=Path(d))
        t_cold = time.perf_counter() - t0
        hits = []
        for _ in range(5):
            t0 = time.perf_counter()
            hit = compile_candidate(src, task.gencode, out_dir=Path(d))
            hits.append(time.perf_counter() - t0)
            assert hit.cache_hit
    print(
        f"compile cold: {t_cold:.2f} s ({cold.status}); cache hit median: {statistics.median(hits) * 1e3:.1f} ms"
    )
    stages: dict[str, list[float]] = {}
    totals = []
    for i in range(args.runs):
        rep = sb.evaluate(task, src)
        totals.append(rep.total_wall_s)
        for s in rep.stages():
            stages.setdefault(s.stage, []).append(s.wall_s)
        print(
            f"run {i + 1}: total {rep.total_wall_s:.2f} s success={rep.success} "
            + " ".join(f"{s.stage}={s.wall_s:.2f}" for s in rep.stages())
        )
    print("median per stage (s): " + ", ".join(f"{k}={statistics.median(v):.2f}" for k, v in stages.items()))
    med = statistics.median(totals)
    print(
        f"median end to end: {med:.2f} s (target <= 15 s: {'met' if med <= 15 else 'MISSED'}); "
        f"cache hit {statistics.median(hits) * 1e3:.1f} ms (target < 200 ms: "
        f"{'met' if statistics.median(hits) < 0.2 else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
