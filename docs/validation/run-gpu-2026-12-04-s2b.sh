#!/usr/bin/env bash
# device run of 2026-12-04 (session 2, b): mutants in fresh candidate processes of one worker; the
# warp-reduce-redux reference and controls with every stage, per-stage wall times
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
timeout 280 python3 docs/validation/integrity-smoke.py $OUT warp-reduce-redux 2>&1 | tee -a $OUT/log.txt
python3 - <<'PY' | tee -a $OUT/log.txt
import json, os
for l in open(os.environ["OUT"] + "/integrity-smoke.jsonl"):
    r = json.loads(l)
    print(r["kernel"], r["wall_s"], r["stage_wall_s"])
PY
