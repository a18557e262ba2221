#!/usr/bin/env bash
# GPU validation run of 2026-12-02 (second): hostile suite through the service (isolation on), knowledge-pack
# unit kernels. Run from the repository root on the H200 with .whl/ carried.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
PTXRAG_ISOLATE=1 timeout 200 python3 -m pytest -m gpu tests/test_hostile_gpu.py -v -s \
  -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests-isolated.txt" | grep -E "PASSED|FAILED|ERROR|passed|failed|->" | cut -c1-300
PTXRAG_TASKS_PATH=corpus/templates/unit timeout 170 python3 -m ptxrag tasks validate $(ls corpus/templates/unit) \
  --stage-timeout 15 2>&1 | tee "$OUT/unit-kernels-validate.txt" | tail -40
