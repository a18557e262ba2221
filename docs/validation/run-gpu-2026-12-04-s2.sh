#!/usr/bin/env bash
# device run 1 of 2026-12-04 (session 2): torch-free candidate process, rtld audit, CUPTI stream record
cd /work/main 2>/dev/null || true
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
ls /usr/local/cuda/include/cupti.h /usr/local/cuda/extras/CUPTI/include/cupti.h 2>&1 | tee -a $OUT/log.txt
python3 -c "from ptxrag.sandbox.native import native_helpers; print(native_helpers())" 2>&1 | tee -a $OUT/log.txt
timeout 300 python3 docs/validation/integrity-smoke.py $OUT warp-reduce-redux 2>&1 | tee -a $OUT/log.txt
timeout 200 python3 docs/validation/integrity-smoke.py $OUT --no-mutation --refs bulk-copy-scale gemm-wgmma-bf16 tma-pipeline-rmsnorm ldmatrix-stmatrix-transpose cluster-dsmem-rownorm 2>&1 | tee -a $OUT/log.txt
