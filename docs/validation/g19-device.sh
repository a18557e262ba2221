#!/usr/bin/env bash
# g19 (issue 19, the study's GEMM as a suite task): on the H200, (a) build tile/stage/raster/epilogue
# variants of ptxrag/tasks/suite/gemm-n7168-k5120-bf16/solution.cu and time each against cuBLAS at
# M=8192, N=7168, K=5120 (each variant in its own process under a timeout, so a hang costs only itself),
# with a correctness check against torch at M=8192, 1000 and 129; (b) `ptxrag tasks validate` on the task.
# Everything goes to $OUT incrementally. Under 150 s.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/g19-out}; mkdir -p "$OUT/so"
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)" | tee "$OUT/log.txt"
VARIANTS=(
  "c2-s4-epi1-g16=CLUSTER=2,STAGES=4,EPI=1,GROUP_M=16"
  "c2-s4-epi0-g16=CLUSTER=2,STAGES=4,EPI=0,GROUP_M=16"
  "c1-s4-epi1-g16=CLUSTER=1,STAGES=4,EPI=1,GROUP_M=16"
  "c2-s3-epi1-g16=CLUSTER=2,STAGES=3,EPI=1,GROUP_M=16"
  "c2-s4-epi1-g8=CLUSTER=2,STAGES=4,EPI=1,GROUP_M=8"
  "c2-s4-epi1-g32=CLUSTER=2,STAGES=4,EPI=1,GROUP_M=32"
)
args=(); for v in "${VARIANTS[@]}"; do args+=(--variant "$v"); done
timeout 40 python3 docs/validation/g19_bench.py --out "$OUT/so" "${args[@]}" --with-ws --build-only > "$OUT/build.txt" 2>&1
echo "== $(date -u) built (rc $?)" >> "$OUT/log.txt"
for v in "${VARIANTS[@]}" ws; do
  if [ "$v" = ws ]; then a=(--with-ws); else a=(--variant "$v"); fi
  timeout 20 python3 docs/validation/g19_bench.py --out "$OUT/so" "${a[@]}" 2>&1 | grep -v '^##\|^built' >> "$OUT/bench.txt"
  echo "== $(date -u) ${v%%=*} done" >> "$OUT/log.txt"
done
timeout 60 python3 -m ptxrag tasks validate gemm-n7168-k5120-bf16 > "$OUT/validate.txt" 2>&1
echo "== $(date -u) validate rc $?" >> "$OUT/log.txt"
