"""Benchmark: full GPU evaluations of a task's reference, per stage, and a compile-cache hit.

Every run evaluates a distinct source (the reference plus a comment naming the run), so each compiles afresh as
an agent's new candidate would. By default one Sandbox evaluates them all, so run 1 starts the GPU worker (cold)
and later runs find it warm; ``--cold`` starts a new worker per run (the path before the warm worker).
Targets: median end to end <= 15 s on the H200 (issue 2); compile-cache hit < 0.2 s; warm evaluations fast
enough for 1000 candidates per GPU-hour (3.6 s each, issue 21).
Usage: python benchmarks/sandbox_bench.py [--runs 5] [--task warp-reduce-redux] [--cold]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from ptxrag.sandbox import Sandbox, SandboxConfig
from ptxrag.sandbox.compile import compile_candidate
from ptxrag.tasks import load_task


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--task", default="warp-reduce-redux")
    ap.add_argument("--cold", action="store_true", help="a new GPU worker for every run (no warm worker)")
    args = ap.parse_args()
    task = load_task(args.task)
    src = task.solution_source()
    sb = Sandbox(config=SandboxConfig(keep_worker=not args.cold))
    mode = "cold (new worker per run)" if args.cold else "warm (one worker kept between runs)"
    print(
        f"# sandbox benchmark {date.today()} task={task.id} gpu={sb.gpu.label if sb.gpu else 'none'} "
        f"mode={mode}"
    )
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
    nonce = time.time_ns()
    with sb:
        for i in range(args.runs):
            rep = sb.evaluate(task, f"{src}\n// sandbox_bench run {i + 1} of {nonce}\n")
            totals.append(rep.total_wall_s)
            for s in rep.stages():
                stages.setdefault(s.stage, []).append(s.wall_s)
            cached = " (library time reused)" if rep.timing and rep.timing.baseline_cached else ""
            print(
                f"run {i + 1}: total {rep.total_wall_s:.2f} s success={rep.success} "
                + " ".join(f"{s.stage}={s.wall_s:.2f}" for s in rep.stages())
                + cached,
                flush=True,
            )
    print("median per stage (s): " + ", ".join(f"{k}={statistics.median(v):.2f}" for k, v in stages.items()))
    med = statistics.median(totals)
    print(
        f"median end to end: {med:.2f} s (target <= 15 s: {'met' if med <= 15 else 'MISSED'}); "
        f"cache hit {statistics.median(hits) * 1e3:.1f} ms (target < 200 ms: "
        f"{'met' if statistics.median(hits) < 0.2 else 'MISSED'})"
    )
    if not args.cold and len(totals) > 1:
        warm = statistics.median(totals[1:])
        print(
            f"first run (starts the worker): {totals[0]:.2f} s; warm median (runs 2-{len(totals)}): {warm:.2f} s "
            f"= {3600 / warm:.0f} candidates per GPU-hour one at a time (target 1000: "
            f"{'met' if 3600 / warm >= 1000 else 'MISSED'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
