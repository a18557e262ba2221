"""Fill the sandbox's compile cache for every task's reference solution and controls, in parallel.

`ptxrag tasks validate` compiles one candidate at a time, between GPU stages; on a many-core GPU box this warms
the cache first so that validation spends its time on the GPU. Nothing is judged here: the validation that
follows reports every stage (a cached compile says "compiled (from cache)").
    python3 scripts/precompile.py [--jobs N] [TASK_ID ...]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

from ptxrag.sandbox.compile import compile_candidate
from ptxrag.tasks import list_tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("tasks", nargs="*")
    args = ap.parse_args()
    tasks = [t for t in list_tasks() if not args.tasks or t.id in args.tasks]
    units = [(t, "solution", t.solution_source()) for t in tasks]
    units += [(t, c.file, t.path(c.file).read_text()) for t in tasks for c in t.controls]
    t0 = time.monotonic()

    def one(u):
        task, name, src = u
        r = compile_candidate(src, task.gencode)
        return task.id, name, r.ok, r.wall_s

    with ThreadPoolExecutor(args.jobs) as pool:
        for tid, name, ok, wall in pool.map(one, units):
            print(f"{tid:30s} {name:45s} {'compiled' if ok else 'did not compile'} {wall:6.1f} s")
    print(f"{len(units)} sources in {time.monotonic() - t0:.1f} s with {args.jobs} jobs")


if __name__ == "__main__":
    main()
