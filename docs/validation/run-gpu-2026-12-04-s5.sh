#!/usr/bin/env bash
# Device runs of 2026-12-04 session 5, one `run` call per part, at most 8 files under $OUT per call.
#   PART=a  issue 15: every reference, control and honest alternative of the suite (less the GEMM n7168 and
#           attention tasks, which part b validates) through every stage, 4 processes sharing the GPU by the
#           sandbox's GpuShare (checks together, Nsight Compute and timing alone); then the verdicts against
#           the declarations (integrity-summary.py). Files: log.txt, lanes.txt, lane-0..3.jsonl, summary.txt
#   PART=b  issue 19 (g19-device.sh) and issue 20 (a20-device.sh, then its validate mode); each part's files
#           in one tarball made as soon as the part ends (g19.tgz, a20.tgz, a20-validate.tgz) + log.txt
#   PART=c  issue 21: warm-worker test, throughput at 3 checking at once and at 1, the hostile cases left
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
SKIP=(--skip gemm-n7168-k5120-bf16 --skip mha-fwd-lse-d128 --skip mha-fwd-lse-d128-causal)
log "part ${PART:-a} on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
case "${PART:-a}" in
a)
  for i in 0 1 2 3; do
    timeout "${LANE_S:-520}" python3 docs/validation/integrity-smoke.py "$OUT" --lane "$i/4" --shared "${SKIP[@]}" \
      --log "lane-$i.jsonl" >> "$OUT/lanes.txt" 2>&1 &
  done
  wait
  log "lanes done"
  python3 docs/validation/integrity-summary.py "$OUT"/lane-*.jsonl "${SKIP[@]}" > "$OUT/summary.txt" 2>&1
  rc=$?
  log "summary rc=$rc"
  tail -40 "$OUT/summary.txt" ;;
b)
  OUT=/tmp/g19-out timeout 170 bash docs/validation/g19-device.sh > /tmp/g19-stdout.txt 2>&1
  rc=$?
  cp /tmp/g19-stdout.txt /tmp/g19-out/
  tar czf "$OUT/g19.tgz" -C /tmp g19-out
  log "g19 rc=$rc"
  tail -30 /tmp/g19-out/bench.txt
  OUT=/tmp/a20-out timeout 170 bash docs/validation/a20-device.sh > /tmp/a20-stdout.txt 2>&1
  rc=$?
  cp /tmp/a20-stdout.txt /tmp/a20-out/
  tar czf "$OUT/a20.tgz" -C /tmp a20-out
  log "a20 rc=$rc"
  OUT=/tmp/a20-val A20_MODE=validate timeout 170 bash docs/validation/a20-device.sh > /tmp/a20-val-stdout.txt 2>&1
  rc=$?
  cp /tmp/a20-val-stdout.txt /tmp/a20-val/ 2>/dev/null
  tar czf "$OUT/a20-validate.tgz" -C /tmp a20-val
  log "a20 validate rc=$rc"
  tail -30 /tmp/a20-val/validate.txt ;;
c)
  timeout 90 python3 -m pytest -m gpu tests/test_sandbox_gpu.py -k warm_worker -v -s -p no:cacheprovider > "$OUT/warm-test.txt" 2>&1
  log "warm test rc=$?"
  timeout 150 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 3 --limit 40 --log "$OUT/throughput.jsonl" > "$OUT/throughput.txt" 2>&1
  log "throughput shared=3 rc=$?"
  timeout 150 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 1 --limit 40 --log "$OUT/throughput-shared1.jsonl" > "$OUT/throughput-shared1.txt" 2>&1
  log "throughput shared=1 rc=$?"
  timeout 60 python3 -m pytest -m gpu -v -p no:cacheprovider "tests/test_hostile_gpu.py::test_hostile_candidate_is_contained_and_the_service_keeps_serving[background-process]" tests/test_hostile_gpu.py::test_secret_file_and_network_and_writes_outside_are_denied > "$OUT/hostile-rest.txt" 2>&1
  log "hostile rest rc=$?"
  tail -15 "$OUT/throughput.txt" "$OUT/throughput-shared1.txt" ;;
esac
