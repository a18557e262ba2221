"""GPU smoke run of the integrity checks: every reference and control through the sandbox, one line each.

Run on the H200 from the repository root: source scripts/gpu-env.sh; python3 docs/validation/integrity-smoke.py OUT
(mutation disabled with --no-mutation; --refs: references only; --no-refs: controls and honest alternatives
only; --adversarial: only the controls of the integrity classes, whose why starts "class N"; --log NAME:
write OUT/NAME instead). Writes OUT/integrity-smoke.jsonl line by line.
"""

import json
import sys
import time

from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.tasks import list_tasks

out = sys.argv[1]
args = sys.argv[2:]
log_name = args[args.index("--log") + 1] if "--log" in args else "integrity-smoke.jsonl"
only = [a for a in args if not a.startswith("--") and a != log_name]
cfg = SandboxConfig(stage_limits=StageLimits(correctness_s=30, execution_s=120, timing_s=120))
cfg.run_mutation = "--no-mutation" not in sys.argv
sb = Sandbox(cfg)
with open(f"{out}/{log_name}", "a") as log:
    for task in list_tasks():
        if only and task.id not in only:
            continue
        items = (
            [("reference", task.solution, None)]
            + [
                (c.file, c.file, c.must_fail_at)
                for c in task.controls
                if "--adversarial" not in sys.argv or c.why.startswith("class ")
            ]
            + [(a.file, a.file, None) for a in task.alternatives]
        )
        if "--refs" in sys.argv:
            items = items[:1]
        if "--no-refs" in sys.argv:
            items = items[1:]
        for name, file, must in items:
            t0 = time.time()
            rep = sb.evaluate(task, task.path(file).read_text())
            ff = rep.first_failure
            row = {
                "task": task.id,
                "kernel": name,
                "must_fail_at": must,
                "success": rep.success,
                "failed_at": ff.stage if ff else None,
                "wall_s": round(time.time() - t0, 2),
                "stages": {s.stage: [s.status, s.message[:400]] for s in rep.stages()},
                "stage_wall_s": {s.stage: round(s.wall_s, 2) for s in rep.stages() if s.wall_s is not None},
            }
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(
                task.id,
                name,
                "->",
                row["failed_at"] or ("SUCCESS" if rep.success else "no failure"),
                f"(must {must})",
                row["wall_s"],
                "s",
                flush=True,
            )
            if ff:
                print("   ", ff.message[:300], flush=True)
