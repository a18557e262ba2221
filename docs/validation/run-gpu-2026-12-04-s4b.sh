#!/usr/bin/env bash
# device run of 2026-12-04 session 4, second call (the lead's part): the warm-worker test after the subreaper
# fix of the ncu launch, the two hostile cases the first call's limit cut off, and the throughput benchmark
# (mixed stream of references and controls, 4 in flight, 3 checking on the GPU at once, ncu and timing alone).
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) warm test" | tee -a $OUT/log.txt
timeout 90 python3 -m pytest -m gpu tests/test_sandbox_gpu.py -k warm_worker -v -s -p no:cacheprovider > $OUT/warm-test.txt 2>&1
rc=$?; echo "== $(date -u) throughput rc=$rc" >> $OUT/log.txt
timeout 100 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 3 --limit 40 --log $OUT/throughput.jsonl > $OUT/throughput.txt 2>&1
rc=$?; echo "== $(date -u) hostile rest rc=$rc" >> $OUT/log.txt
timeout 50 python3 -m pytest -m gpu -v -p no:cacheprovider "tests/test_hostile_gpu.py::test_hostile_candidate_is_contained_and_the_service_keeps_serving[background-process]" tests/test_hostile_gpu.py::test_secret_file_and_network_and_writes_outside_are_denied > $OUT/hostile-rest.txt 2>&1
rc=$?; echo "== $(date -u) lead done rc=$rc" >> $OUT/log.txt
