#!/usr/bin/env bash
# H200 run for issue 20 (forward pass): the mha-fwd-lse-d128 and -causal reference kernels, their diagnostic
# variants and all twelve controls through a standalone harness (docs/validation/a20-mha-fwd-harness.py:
# float64 reference, NaN-poisoned outputs, cuDNN timed by the same function), then `ptxrag tasks validate` on
# the two tasks with whatever is left of the 150 s. The device returns only a few files, so $OUT holds at
# most seven: log.txt, compile.txt, results.jsonl (every harness line, tagged with its step), stderr.txt,
# validate.txt, validate.json, counts.txt; results.jsonl and stderr.txt are rebuilt after every step.
#   A20_MODE=validate bash docs/validation/a20-device.sh   only `tasks validate` of the two tasks (a second
#   run), then the unit-wgmma-rs GPU test if time is left; A20_TASKS="mha-fwd-lse-d128" validates one task
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/a20-out}"
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((145 - ($(date +%s) - T0))); }
log() { echo "== $(date -u +%T) +$(($(date +%s) - T0))s $*" | tee -a "$OUT/log.txt"; }
H=docs/validation/a20-mha-fwd-harness.py
R=/tmp/a20-res
rm -rf "$R"
mkdir -p "$R"
collect() {  # every step's JSON lines into one file, tagged; the stderr tails into another
  for f in "$R"/*.jsonl; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .jsonl)
    sed "s/^{/{\"step\": \"$n\", /" "$f"
  done > "$OUT/results.jsonl"
  for f in "$R"/*.err; do [ -s "$f" ] && { echo "## $(basename "$f")"; tail -20 "$f"; }; done > "$OUT/stderr.txt" 2>/dev/null
  [ -f "$R/controls.txt" ] && cat "$R/controls.txt" >> "$OUT/log.txt" && rm -f "$R/controls.txt"
}
NC=mha-fwd-lse-d128
CA=mha-fwd-lse-d128-causal
S=ptxrag/tasks/suite

ENV_DONE=
gpu_env() { [ -n "$ENV_DONE" ] || { source scripts/gpu-env.sh >> "$OUT/log.txt" 2>&1; ENV_DONE=1; }; }
validate() {
  gpu_env
  export PTXRAG_HOME=/tmp/ph-a20
  local t
  t=$(left)
  [ "$t" -gt 20 ] || { log "no time left for tasks validate"; return; }
  local tasks="${A20_TASKS:-$NC $CA}"
  log "tasks validate $tasks (timeout ${t}s)"
  # shellcheck disable=SC2086
  timeout "$t" python3 -m ptxrag tasks validate $tasks --stage-timeout 15 --record-counts \
    --save-json "$OUT/validate.json" > "$OUT/validate.txt" 2>&1
  log "tasks validate rc=$?"
  for x in $NC $CA; do echo "## $x"; cat "$S/$x/execution-counts.json" 2>/dev/null; done > "$OUT/counts.txt"
}

log "start $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) nvcc $(nvcc --version | tail -1)"
if [ "${A20_MODE:-}" = validate ]; then
  gpu_env
  validate
  if [ "$(left)" -gt 30 ]; then
    log "unit-wgmma-rs (register-A wgmma, N-major B) through the sandbox"
    PTXRAG_HOME=/tmp/ph-a20 timeout "$(left)" python3 -m pytest -m gpu tests/test_corpus_units_gpu.py -k unit-wgmma-rs \
      -q -p no:cacheprovider >> "$OUT/log.txt" 2>&1
    log "unit-wgmma-rs rc=$?"
  fi
  log done
  exit 0
fi

B=/tmp/a20-build
rm -rf "$B"
mkdir -p "$B"
build() {  # build NAME SOURCE [flags]: build $B/NAME.so, ptxas report in $B/NAME.log
  local name=$1 src=$2
  shift 2
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -shared -Xcompiler -fPIC -lineinfo \
    -Iptxrag/sandbox/abi -Iptxrag/corpus/templates -Xptxas -v "$@" "$src" -o "$B/$name.so" > "$B/$name.log" 2>&1
  echo "rc=$?" >> "$B/$name.log"
}
# diagnostic copy: the V descriptor's LBO and SBO exchanged (tells a wrong N-major descriptor from other bugs)
sed 's/make_smem_desc(v_tile + kk \* 2048, BOX_BYTES, 1024,/make_smem_desc(v_tile + kk * 2048, 1024, BOX_BYTES,/' \
  "$S/$NC/solution.cu" > "$B/vswap.cu"
log "compile"
for t in nc ca; do
  [ $t = nc ] && d=$NC || d=$CA
  build $t-sol "$S/$d/solution.cu" &
  build $t-st3 "$S/$d/solution.cu" -DFA_STAGES=3 &
  build $t-noov "$S/$d/solution.cu" -DFA_OVERLAP=0 &
  build $t-pp "$S/$d/solution.cu" -DFA_PINGPONG=1 &
  build $t-pp3 "$S/$d/solution.cu" -DFA_PINGPONG=1 -DFA_STAGES=3 &
  [ $t = nc ] && cz=0 || cz=1
  build $t-pers docs/validation/a20-variants/mha_fwd_persistent.cu -DFA_CAUSAL=$cz &
  build $t-perspp docs/validation/a20-variants/mha_fwd_persistent.cu -DFA_CAUSAL=$cz -DFA_PINGPONG=1 &
  for c in "$S/$d"/controls/*.cu; do build "$t-ctl-$(basename "$c" .cu)" "$c" & done
done
build nc-vswap "$B/vswap.cu" &
wait
for f in "$B"/*.log; do echo "## $(basename "$f" .log)"; grep -E "error|warning|Used|spill|rc=" "$f"; done > "$OUT/compile.txt"
log "compiled: $(grep -c 'rc=0' "$OUT/compile.txt") ok of $(ls "$B"/*.log | wc -l)"

log "reference kernels and variants (3 stages, no overlap, V descriptor swapped): check shapes + timing shape, timing"
timeout 45 python3 $H check $NC "$B/nc-sol.so" "$B/nc-st3.so" "$B/nc-noov.so" "$B/nc-vswap.so" --big --time \
  > "$R/sol-$NC.jsonl" 2> "$R/sol-$NC.err"
log "rc=$? $(grep -c '"passed": true' "$R/sol-$NC.jsonl") passed lines"
collect
timeout 40 python3 $H check $CA "$B/ca-sol.so" "$B/ca-st3.so" "$B/ca-noov.so" --big --time \
  > "$R/sol-$CA.jsonl" 2> "$R/sol-$CA.err"
log "rc=$? $(grep -c '"passed": true' "$R/sol-$CA.jsonl") passed lines"
collect

log "cuDNN baseline"
timeout 35 python3 $H baseline $NC $CA > "$R/cudnn.jsonl" 2> "$R/cudnn.err"
log "rc=$?"
collect

if [ "$(left)" -gt 40 ]; then
  log "ping-pong and persistent variants (own processes: a hang there must not cost the results above)"
  timeout 20 python3 $H check $NC "$B/nc-pp.so" "$B/nc-pp3.so" "$B/nc-pers.so" "$B/nc-perspp.so" --time \
    > "$R/pp-$NC.jsonl" 2> "$R/pp-$NC.err"
  log "rc=$?"
  timeout 20 python3 $H check $CA "$B/ca-pp.so" "$B/ca-pp3.so" "$B/ca-pers.so" "$B/ca-perspp.so" --time \
    > "$R/pp-$CA.jsonl" 2> "$R/pp-$CA.err"
  log "rc=$?"
  collect
else
  log "skipped the ping-pong variants: $(left) s left"
fi

if [ "$(left)" -gt 30 ]; then
  log "controls (6 at a time, 20 s each; the deadlock one is stopped by its timeout)"
  run_ctl() {
    local so=$1 task=$2 n
    n=$(basename "$so" .so)
    timeout 20 python3 $H check "$task" "$so" > "$R/ctl-$n.jsonl" 2> "$R/ctl-$n.err"
    echo "$n rc=$?" >> "$R/controls.txt"
  }
  i=0
  for so in "$B"/nc-ctl-*.so "$B"/ca-ctl-*.so; do
    case $so in *nc-ctl-*) task=$NC ;; *) task=$CA ;; esac
    run_ctl "$so" "$task" &
    i=$((i + 1))
    [ $((i % 6)) -eq 0 ] && wait
  done
  wait
  log "controls done (rc 124 = timed out)"
  collect
else
  log "skipped the controls: $(left) s left"
fi

python3 docs/validation/a20-summarize.py "$OUT/results.jsonl" >> "$OUT/log.txt" 2>&1
validate
log done
