#!/usr/bin/env bash
# first device run of 2026-12-04 (session 3): the cold path before the warm pipeline (sandbox_bench on two
# tasks), every reference with every stage in sequence (no concurrent ncu), and the hostile-kernel service
# suite with the service's log kept (the honest-after-hostile failure of session 2).
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee $OUT/log.txt
timeout 150 python3 benchmarks/sandbox_bench.py --runs 5 > $OUT/bench-warp-reduce.txt 2>&1
timeout 100 python3 benchmarks/sandbox_bench.py --runs 3 --task bulk-copy-scale > $OUT/bench-bulk-copy.txt 2>&1
echo "== $(date -u) refs" >> $OUT/log.txt
timeout 240 python3 docs/validation/integrity-smoke.py $OUT --refs --log refs.jsonl > $OUT/refs.txt 2>&1
echo "== $(date -u) hostile" >> $OUT/log.txt
timeout 200 python3 -m pytest -m gpu tests/test_hostile_gpu.py -v -s -p no:cacheprovider -x > $OUT/hostile.txt 2>&1
(dmesg 2>&1 | tail -30; ls -la /tmp/pytest-of-*/pytest-*/svc0/artifacts 2>&1 | tail -3) > $OUT/after-hostile.txt
for d in /tmp/pytest-of-*/pytest-*/svc0/artifacts/*/; do echo "## $d"; tail -c 1500 $d/worker.log 2>/dev/null; done > $OUT/worker-logs.txt 2>&1
echo "== $(date -u) done" >> $OUT/log.txt
