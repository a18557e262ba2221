#!/usr/bin/env bash
# final device run of 2026-12-04 (session 2): in six parallel lanes over the 13 tasks, every reference with
# every stage, every integrity-class control ("class N" in its why) and every honest alternative. Verdicts
# are the record; wall times run with six evaluations sharing the GPU and its 16 cores (not a cost record).
# Run from the repository root on the H200 with .whl/ carried.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
python3 -c "from ptxrag.sandbox.native import native_helpers; print(native_helpers())" >> $OUT/log.txt 2>&1
tasks=($(ls ptxrag/tasks/suite))
for lane in 0 1 2 3 4 5; do
  sel=()
  for i in "${!tasks[@]}"; do [ $((i % 6)) -eq $lane ] && sel+=("${tasks[$i]}"); done
  timeout 215 python3 docs/validation/integrity-smoke.py $OUT --adversarial --log lane-$lane.jsonl "${sel[@]}" \
    > $OUT/lane-$lane.txt 2>&1 &
done
wait
cat $OUT/lane-*.txt >> $OUT/log.txt
echo "== $(date -u) done" | tee -a $OUT/log.txt
