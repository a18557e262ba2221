#!/usr/bin/env bash
# g19 (issue 19, the study's GEMM as a suite task), on the H200, under 150 s. Only four small text files go to
# $OUT (log.txt, validate.txt, validate.json, bench.txt), written as things happen; the built libraries stay in
# /tmp (the first run of 2026-12-04 lost all its output when they, in $OUT, took the device's file quota):
# (1) `ptxrag tasks validate gemm-n7168-k5120-bf16 --record-counts` (reference: every stage incl. timing at
#     m = 8192 against cuBLAS; controls: where they must fail), the recorded counts appended to validate.txt;
# (2) variants of the reference (cluster 1|2, 3|4 stages, epilogue direct / TMA store with 1 or 2 staging
#     buffers, raster group 8|16) and the gemm-ws-setmaxnreg-bf16 reference, built in parallel with nvcc, then
#     each timed against cuBLAS at m = 8192 in its own process under a timeout (a hang costs only itself),
#     checked against torch at m = 8192, 1000 and 129 (docs/validation/g19_bench.py).
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/g19-out}; SO=/tmp/g19-so; mkdir -p "$OUT" "$SO"
T=ptxrag/tasks/suite/gemm-n7168-k5120-bf16
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader)" | tee "$OUT/log.txt"
timeout 80 python3 -m ptxrag tasks validate gemm-n7168-k5120-bf16 --stage-timeout 30 --record-counts --save-json "$OUT/validate.json" > "$OUT/validate.txt" 2>&1
rc=$?; echo "== $(date -u) validate rc $rc (t=${SECONDS}s)" >> "$OUT/log.txt"
(echo "== execution-counts.json"; cat "$T/execution-counts.json") >> "$OUT/validate.txt" 2>&1
VARIANTS=(
  "c2-s4-epi1-g16=CLUSTER=2,STAGES=4,EPI=1,GROUP_M=16"
  "c2-s3-epi2-g16=CLUSTER=2,STAGES=3,EPI=2,GROUP_M=16"
  "c2-s4-epi0-g16=CLUSTER=2,STAGES=4,EPI=0,GROUP_M=16"
  "c1-s4-epi1-g16=CLUSTER=1,STAGES=4,EPI=1,GROUP_M=16"
  "c2-s4-epi1-g8=CLUSTER=2,STAGES=4,EPI=1,GROUP_M=8"
)
args=(); for v in "${VARIANTS[@]}"; do args+=(--variant "$v"); done
timeout 40 python3 docs/validation/g19_bench.py --out "$SO" "${args[@]}" --with-ws --build-only >> "$OUT/bench.txt" 2>&1
rc=$?; echo "== $(date -u) built rc $rc (t=${SECONDS}s)" >> "$OUT/log.txt"
for v in "${VARIANTS[@]}" ws; do
  if [ "$SECONDS" -gt 138 ]; then echo "== skipped ${v%%=*}: out of time" >> "$OUT/log.txt"; continue; fi
  if [ "$v" = ws ]; then a=(--with-ws); else a=(--variant "$v"); fi
  timeout 11 python3 docs/validation/g19_bench.py --out "$SO" "${a[@]}" 2>&1 | grep -v '^##\|^built' >> "$OUT/bench.txt"
  rc=${PIPESTATUS[0]}; echo "== $(date -u) ${v%%=*} rc $rc (t=${SECONDS}s)" >> "$OUT/log.txt"
done
