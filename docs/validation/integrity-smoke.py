"""GPU smoke run of the integrity checks: every reference and control through the sandbox, one line each.

Run on the H200 from the repository root: source scripts/gpu-env.sh; python3 docs/validation/integrity-smoke.py OUT
(mutation disabled with --no-mutation; --refs: references only; --no-refs: controls and honest alternatives
only; --adversarial: only the controls of the integrity classes, whose why starts "class N"; --log NAME:
write OUT/NAME instead; --lane I/N: only every N-th kernel of the whole list, starting at I, so that N processes
share the work; --shared: checks take the GPU shared with other processes, Nsight Compute and timing alone, by
the sandbox's GpuShare; --skip TASK (repeatable): leave a task out). Writes OUT/integrity-smoke.jsonl line by
line; a reference whose execution stage passed also gets the predicated-on counts that `ptxrag tasks validate
--record-counts` would write (at the first check shape).
"""

import json
import sys
import time

from ptxrag.sandbox import Sandbox, SandboxConfig, StageLimits
from ptxrag.sandbox.gpushare import GpuShare, visible_gpu_id
from ptxrag.tasks import list_tasks

out = sys.argv[1]
args = sys.argv[2:]


def values(flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag and i + 1 < len(args)]


log_name = (values("--log") or ["integrity-smoke.jsonl"])[0]
lane, lanes = (int(x) for x in (values("--lane") or ["0/1"])[0].split("/"))
skip = set(values("--skip"))
flag_values = {
    args[i + 1] for i, a in enumerate(args) if a in ("--log", "--lane", "--skip") and i + 1 < len(args)
}
only = [a for a in args if not a.startswith("--") and a not in flag_values]
cfg = SandboxConfig(stage_limits=StageLimits(correctness_s=30, execution_s=120, timing_s=120))
cfg.run_mutation = "--no-mutation" not in sys.argv
if "--shared" in sys.argv:
    cfg.gpu_share = GpuShare(visible_gpu_id(), shared=2)
sb = Sandbox(cfg)
work = []
for task in list_tasks():
    if (only and task.id not in only) or task.id in skip:
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
    work += [(task, *item) for item in items]
tag = f"[lane {lane}/{lanes}] " if lanes > 1 else ""
with open(f"{out}/{log_name}", "a") as log:
    for task, name, file, must in work[lane::lanes]:
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
        if name == "reference" and rep.execution.status == "passed":  # what --record-counts would write
            row["gpu"] = rep.gpu
            row["dims"] = task.shapes.check[0]
            row["counts"] = {i.ptx: i.predicated_on_thread_instructions for i in rep.execution.instructions}
        log.write(json.dumps(row) + "\n")
        log.flush()
        verdict = row["failed_at"] or ("SUCCESS" if rep.success else "no failure")
        print(f"{tag}{task.id} {name} -> {verdict} (must {must}) {row['wall_s']} s", flush=True)
        if ff:
            print(f"{tag}    {ff.message[:300]}", flush=True)
