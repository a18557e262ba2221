"""Verdicts of integrity-smoke.py runs against what every kernel declares, and what did not run.

python3 docs/validation/integrity-summary.py LOG.jsonl [LOG.jsonl ...] [--skip TASK ...] [TASK ...]
(tasks named: only those are expected to have run)
A reference or honest alternative must succeed; a control must fail at its ``must_fail_at`` stage (one of them,
where it names several). Prints one
line per kernel that broke its declaration, the kernels of the suite (less the skipped tasks) with no line, and
the counts; exits 1 when any declaration broke.
"""

import json
import sys

from ptxrag.tasks import list_tasks

args = sys.argv[1:]
skip = {args[i + 1] for i, a in enumerate(args) if a == "--skip" and i + 1 < len(args)}
logs = [a for a in args if a.endswith(".jsonl")]
only = {a for a in args if not a.startswith("--") and not a.endswith(".jsonl") and a not in skip}
rows = {}
for path in logs:
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows[(r["task"], r["kernel"])] = r
expected = {}
for task in list_tasks():
    if task.id in skip or (only and task.id not in only):
        continue
    expected[(task.id, "reference")] = None
    expected.update({(task.id, c.file): c.must_fail_at for c in task.controls})
    expected.update({(task.id, a.file): None for a in task.alternatives})
ran_tasks = {k[0] for k in expected}
rows = {k: r for k, r in rows.items() if k[0] in ran_tasks}
broke, kept = [], 0
for key, r in sorted(rows.items()):
    must = expected.get(key, r.get("must_fail_at"))
    stages = [must] if isinstance(must, str) else must  # a control may declare several stages
    status = r["stages"].get(r["failed_at"], [""])[0] if r["failed_at"] else ""
    # a harness error at the declared stage judged nothing: it is not the control failing there
    ok = (
        r["success"]
        if must is None
        else (not r["success"] and r["failed_at"] in stages and status == "failed")
    )
    if ok:
        kept += 1
    else:
        got = (
            "success"
            if r["success"]
            else f"{'harness error' if status == 'error' else 'failed'} at {r['failed_at']}"
        )
        want = "success" if must is None else f"fail at {must}"
        msg = ""
        if r["failed_at"]:
            msg = r["stages"].get(r["failed_at"], ["", ""])[1][:200]
        broke.append(f"BROKE {key[0]} {key[1]}: {got}, declared {want}  {msg}")
missing = sorted(k for k in expected if k not in rows)
print("\n".join(broke))
for k in missing:
    print(f"NOT RUN {k[0]} {k[1]}")
refs = [r for k, r in rows.items() if expected.get(k, "x") is None]
walls = sorted(r["wall_s"] for r in rows.values())
med = walls[len(walls) // 2] if walls else 0
print(
    f"{len(rows)} kernels ran: {kept} as declared, {len(broke)} not; {len(missing)} of {len(expected)} not run; "
    f"{sum(r['success'] for r in refs)}/{len(refs)} references and honest alternatives succeeded; "
    f"median wall {med} s"
)
sys.exit(1 if broke else 0)
