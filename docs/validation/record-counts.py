"""Record every task reference's instruction counts (first check shape) on the H200: execution-counts.json.

Run from the repository root: source scripts/gpu-env.sh; python3 docs/validation/record-counts.py OUT
Copies each written file to OUT/counts/<task>.json (the device's checkout is not the source of truth).
"""

import shutil
import sys
from pathlib import Path

from ptxrag.bench.task_validation import record_reference_counts
from ptxrag.sandbox import Sandbox, SandboxConfig
from ptxrag.tasks import list_tasks

out = Path(sys.argv[1]) / "counts"
out.mkdir(parents=True, exist_ok=True)
cfg = SandboxConfig(run_timing=False, run_mutation=False)
sb = Sandbox(cfg)
for task in list_tasks():
    rep = sb.evaluate(task, task.solution_source())
    path = record_reference_counts(task, rep)
    if path:
        shutil.copy(path, out / f"{task.id}.json")
    print(task.id, "recorded" if path else f"NOT recorded: {rep.execution.message[:200]}", flush=True)
