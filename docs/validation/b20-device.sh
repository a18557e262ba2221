#!/usr/bin/env bash
# H200 run for issue 20 (backward pass), for the session after 2026-12-04 s5, which wrote the kernels without a
# GPU. Under 280 s, at most 7 files in $OUT: log.txt, compile.txt, results.jsonl, stderr.txt, lanes.txt,
# lanes.jsonl, summary.txt (each rebuilt as the run goes, so a timeout keeps what came before).
#   1. build the two reference solutions, their variants (BW_STAGES=3; BW_DQ_BULK=1: dq by 16 KB bulk reductions
#      instead of atomics; BW_DQ_OWN=1: each warpgroup's own dq, no cross-warpgroup barrier) and all 13 controls
#      (+ dq_race with BW_DQ_BULK=1) (compile.txt: the ptxas lines)
#   2. b20-mha-bwd-harness.py check: the references on every check shape against the float64 reference, then
#      their times against the cuDNN backward at b=4 h=48 s=4096 (results.jsonl, step "check-*")
#   3. the correctness-stage controls through the same harness (minus the deadlock), to see each one's damage
#   4. b20-mha-bwd-harness.py baseline: which cuDNN kernels ran, cuDNN against the float64 reference, the direct
#      op against autograd on consistent o/lse, autograd backward times (cuDNN and FlashAttention-2 backends)
#   5. the sandbox's own verdicts: integrity-smoke.py lanes (4 processes sharing the GPU, --shared) over the two
#      tasks' references and controls, then integrity-summary.py against the declarations (summary.txt); each
#      passing reference's line carries the execution counts `tasks validate --record-counts` would write
#   B20_MODE=lanes bash docs/validation/b20-device.sh   only step 5, with the whole budget (a second call, if the
#   first run's lanes did not finish)
# What closes the bullets: step 2 "passed": true on every shape for both references; summary.txt with no broken
# declaration; the references' vs_baseline (>= 0.5 required, 0.7 the goal).
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PTXRAG_HOME=/tmp/ph-b20
OUT="${OUT:-/tmp/b20-out}"
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((270 - ($(date +%s) - T0))); }
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }  # a step's timeout
log() { echo "== $(date -u +%T) +$(($(date +%s) - T0))s $*" | tee -a "$OUT/log.txt"; }
H=docs/validation/b20-mha-bwd-harness.py
S=ptxrag/tasks/suite
NC=mha-bwd-d128
CA=mha-bwd-d128-causal
B=/tmp/b20-build
R=/tmp/b20-res
rm -rf "$B" "$R"
mkdir -p "$B" "$R"
collect() {
  for f in "$R"/*.jsonl; do
    [ -e "$f" ] || continue
    sed "s/^{/{\"step\": \"$(basename "$f" .jsonl)\", /" "$f"
  done > "$OUT/results.jsonl"
  for f in "$R"/*.err; do [ -s "$f" ] && { echo "## $(basename "$f")"; tail -20 "$f"; }; done > "$OUT/stderr.txt" 2>/dev/null
}
source scripts/gpu-env.sh >> "$OUT/log.txt" 2>&1
log "start $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) nvcc $(nvcc --version | tail -1)"

if [ "${B20_MODE:-all}" != lanes ]; then
build() {  # build NAME SOURCE [flags]
  local name=$1 src=$2
  shift 2
  timeout "$(cap 90)" nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -shared -Xcompiler -fPIC -lineinfo \
    -Iptxrag/sandbox/abi -Iptxrag/corpus/templates -Xptxas -v "$@" "$src" -o "$B/$name.so" > "$B/$name.log" 2>&1
  echo "rc=$?" >> "$B/$name.log"
}
log "compile"
build nc-sol "$S/$NC/solution.cu" &
build ca-sol "$S/$CA/solution.cu" &
build nc-st3 "$S/$NC/solution.cu" -DBW_STAGES=3 &
build ca-st3 "$S/$CA/solution.cu" -DBW_STAGES=3 &
build nc-bulk "$S/$NC/solution.cu" -DBW_DQ_BULK=1 &
build ca-bulk "$S/$CA/solution.cu" -DBW_DQ_BULK=1 &
build nc-own "$S/$NC/solution.cu" -DBW_DQ_OWN=1 &
build ca-own "$S/$CA/solution.cu" -DBW_DQ_OWN=1 &
build nc-race-bulk "$S/$NC/controls/dq_race.cu" -DBW_DQ_BULK=1 &
for t in nc ca; do
  [ $t = nc ] && d=$NC || d=$CA
  for c in "$S/$d"/controls/*.cu; do build "$t-ctl-$(basename "$c" .cu)" "$c" & done
done
wait
for f in "$B"/*.log; do echo "## $(basename "$f" .log)"; grep -E "registers|spill|warning|error|rc=" "$f"; done > "$OUT/compile.txt"
log "compiled: $(grep -c 'rc=0' "$OUT/compile.txt") of $(ls "$B"/*.log | wc -l)"

for t in nc ca; do
  [ $t = nc ] && d=$NC || d=$CA
  log "check $d references"
  timeout "$(cap 60)" python3 "$H" check $d "$B/$t-sol.so" "$B/$t-st3.so" "$B/$t-bulk.so" "$B/$t-own.so" --time > "$R/check-$t.jsonl" 2> "$R/check-$t.err"
  log "rc=$?"
  collect
done
for t in nc ca; do
  [ $t = nc ] && d=$NC || d=$CA
  log "controls of $d through the harness"
  sos=$(ls "$B"/$t-ctl-*.so "$B"/$t-race-bulk.so 2>/dev/null | grep -v empty_never_released | grep -v cuda_core_fallback)
  # shellcheck disable=SC2086
  timeout "$(cap 25)" python3 "$H" check $d $sos > "$R/controls-$t.jsonl" 2> "$R/controls-$t.err"
  log "rc=$?"
  collect
done
log "baseline"
timeout "$(cap 50)" python3 "$H" baseline $NC $CA > "$R/baseline.jsonl" 2> "$R/baseline.err"
log "rc=$?"
collect
fi

t=$(left)
log "integrity lanes, $t s"
if [ "$t" -gt 40 ]; then
  t=$((t - 15))  # leave time for the summary
  rm -f "$R"/lane-*.jsonl
  for i in 0 1 2 3; do
    timeout "$t" python3 docs/validation/integrity-smoke.py "$R" --lane "$i/4" --shared --log "lane-$i.jsonl" $NC $CA \
      >> "$OUT/lanes.txt" 2>&1 &
  done
  wait
  cat "$R"/lane-*.jsonl > "$OUT/lanes.jsonl" 2>/dev/null
  timeout "$(cap 20)" python3 docs/validation/integrity-summary.py "$R"/lane-*.jsonl $NC $CA > "$OUT/summary.txt" 2>&1
  log "summary rc=$?"
fi
rm -f "$R"/lane-*.jsonl
collect
log done
