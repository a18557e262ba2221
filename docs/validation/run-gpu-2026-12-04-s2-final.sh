#!/usr/bin/env bash
# final device run of 2026-12-04 (session 2): every reference with every stage, one after the other (the
# cost record), then every control and honest alternative in four parallel lanes (verdicts only: their
# timings are not a record). Run from the repository root on the H200 with .whl/ carried.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
timeout 270 python3 docs/validation/integrity-smoke.py $OUT --refs --log references.jsonl 2>&1 | tee -a $OUT/log.txt
tasks=($(ls ptxrag/tasks/suite))
for lane in 0 1 2 3; do
  sel=()
  for i in "${!tasks[@]}"; do [ $((i % 4)) -eq $lane ] && sel+=("${tasks[$i]}"); done
  timeout 250 python3 docs/validation/integrity-smoke.py $OUT --no-refs --log controls-$lane.jsonl "${sel[@]}" \
    > $OUT/lane-$lane.txt 2>&1 &
done
wait
cat $OUT/lane-*.txt >> $OUT/log.txt
echo "== $(date -u) done" | tee -a $OUT/log.txt
