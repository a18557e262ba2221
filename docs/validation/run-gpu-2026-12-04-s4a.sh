#!/usr/bin/env bash
# device run of 2026-12-04 session 4, first call: the warm GPU worker on the H200. The warm benchmark (one
# Sandbox, a distinct source per run), the sandbox GPU tests (one module-wide Sandbox, so hanging and failing
# candidates are followed by passing ones on the same warm worker), the hostile-kernel suite (without -x), and
# the references the last run did not reach, then all of them, in sequence on one warm Sandbox.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
timeout 100 python3 benchmarks/sandbox_bench.py --runs 6 > $OUT/bench-warm-warp-reduce.txt 2>&1
rc=$?; echo "== $(date -u) sandbox gpu tests rc=$rc" >> $OUT/log.txt
timeout 150 python3 -m pytest -m gpu tests/test_sandbox_gpu.py -v -p no:cacheprovider > $OUT/sandbox-gpu.txt 2>&1
rc=$?; echo "== $(date -u) hostile rc=$rc" >> $OUT/log.txt
timeout 130 python3 -m pytest -m gpu tests/test_hostile_gpu.py -v -p no:cacheprovider > $OUT/hostile.txt 2>&1
rc=$?; echo "== $(date -u) refs rc=$rc" >> $OUT/log.txt
timeout 80 python3 docs/validation/integrity-smoke.py $OUT --refs --log refs-missed.jsonl cluster-dsmem-rownorm gemm-tma-multicast-bf16 gemm-ws-setmaxnreg-bf16 > $OUT/refs-missed.txt 2>&1
rc=$?; echo "== $(date -u) all refs rc=$rc" >> $OUT/log.txt
timeout 110 python3 docs/validation/integrity-smoke.py $OUT --refs --log refs.jsonl > $OUT/refs.txt 2>&1
rc=$?; echo "== $(date -u) done rc=$rc" >> $OUT/log.txt
