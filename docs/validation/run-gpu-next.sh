#!/usr/bin/env bash
# What the next session's device time should run first (written 2026-12-04, session 4, when these were left
# unrun). Each part is its own `run` call (600 s each at most); every part writes a handful of text files under
# $OUT only (the device returns a limited number of files per call: the second call of session 4 lost most of
# its records to that). Usage on the GPU box: PART=1 bash docs/validation/run-gpu-next.sh   (1 to 4)
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%T) $*" >> "$OUT/log.txt"; }
case "${PART:-1}" in
1)  # the lead's part of session 4 that came back empty: warm-worker test, throughput, the hostile cases left
    OUT=$OUT bash docs/validation/run-gpu-2026-12-04-s4b.sh
    timeout 200 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 1 --limit 40 > "$OUT/throughput-shared1.txt" 2>&1
    log "throughput shared=1 rc=$?" ;;
2)  # issue 15: every reference, control and alternative in sequence with every stage (the new release mutants
    # and bulk-copy-scale/controls/discarded_bulk_waits.cu included); one log file
    timeout 580 python3 docs/validation/integrity-smoke.py "$OUT" --log integrity.jsonl > "$OUT/integrity.txt" 2>&1
    log "integrity rc=$?" ;;
3)  # issue 19: the n7168 GEMM (its own script keeps to four files)
    OUT=$OUT timeout 580 bash docs/validation/g19-device.sh > "$OUT/stdout.txt" 2>&1
    log "g19 rc=$?" ;;
4)  # issue 20: the attention forward tasks (at most seven files), then their validation
    OUT=$OUT timeout 300 bash docs/validation/a20-device.sh > "$OUT/stdout.txt" 2>&1
    log "a20 rc=$?"
    OUT=$OUT A20_MODE=validate timeout 280 bash docs/validation/a20-device.sh >> "$OUT/stdout.txt" 2>&1
    log "a20 validate rc=$?" ;;
esac
