"""Summarise the results.jsonl that docs/validation/a20-device.sh leaves in $OUT (standard library only).

  python3 docs/validation/a20-summarize.py results.jsonl

Prints, per compiled kernel, whether every check shape passed and its worst error / allowed for o and lse; then
every timing with TFLOP/s and the ratio to cuDNN's aten op (the task baseline) at the same shape and task.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def summarize(lines: list[dict]) -> str:
    out: list[str] = []
    checks: dict[str, list[dict]] = defaultdict(list)
    times: list[dict] = []
    cudnn: dict[tuple[str, int], float] = {}
    for d in lines:
        if "checks" in d or "error" in d:
            checks[d.get("so") or f"cuDNN {d.get('task', '?')}"].append(d)
        if "timing" in d and isinstance(d.get("median_ms"), dict):
            t = d["median_ms"].get("aten_cudnn_lse")
            if isinstance(t, float):
                cudnn[(d["task"], d["timing"]["s"])] = t
            times.append(d)
        elif "timing" in d:
            times.append(d)
    out.append("correctness (worst error / allowed over the check shapes; > 1 fails)")
    for name, rows in sorted(checks.items()):
        ok = all(r.get("passed") for r in rows)
        worst = {"o": 0.0, "lse": 0.0}
        for r in rows:
            for c in r.get("checks", []):
                worst[c["output"]] = max(worst[c["output"]], c["max_err_over_allowed"])
        errs = "; ".join(r["error"] for r in rows if "error" in r)
        shapes = ", ".join(f"s={r['shape']['s']}" for r in rows)
        out.append(
            f"  {name:<34} {'PASS' if ok else 'FAIL'}  o {worst['o']:.3g}  lse {worst['lse']:.3g}  ({shapes}) {errs}"
        )
    out.append("timing (median of 20, L2 flushed; ratio = cuDNN time / this time)")
    for d in times:
        s = d["timing"]["s"]
        if isinstance(d.get("median_ms"), dict):
            for k, v in d["median_ms"].items():
                tf = d.get("tflops", {}).get(k)
                out.append(f"  {d['task']:<24} s={s:<5} {k:<24} {v} ms  {tf} TFLOP/s")
            continue
        base = cudnn.get((d["task"], s))
        ratio = f"{base / d['median_ms']:.2f}x cuDNN" if base else "no cuDNN time"
        out.append(
            f"  {d['task']:<24} s={s:<5} {d['so']:<24} {d['median_ms']} ms  {d['tflops']} TFLOP/s  {ratio}"
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        lines = [json.loads(x) for x in f if x.strip().startswith("{")]
    print(summarize(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
