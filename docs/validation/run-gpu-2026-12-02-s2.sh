#!/usr/bin/env bash
# GPU validation run, second session of 2026-12-02, on the lent H200 with .whl/ carried (scripts/gpu-wheels.sh):
# all 13 knowledge-pack unit kernels (reference + controls), then the hostile suite through the service with
# isolation on (dedicated uid, empty network namespace). The unit kernels go first so that ncu has already run as
# root when the isolated uid runs it (shared /tmp state such as ncu's lock file would show up here).
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) ncu $(ncu --version | tail -1)"
python3 -c "import ptxrag.sandbox.service.server, uvicorn, tenacity, fastapi; print('service imports ok')" || exit 3
first="bulk-reduce or tma-load or tma-store or wgmma"
timeout 230 python3 -m pytest -m gpu tests/test_corpus_units_gpu.py -v -s -p no:cacheprovider -k "$first" 2>&1 \
  | tee "$OUT/units-a.txt" | grep -E "^tests.*(PASSED|FAILED|ERROR)|passed|failed|\[execution\]" | cut -c1-240
echo "== ncu state in /tmp after root runs:"; ls -la /tmp | grep -i nsight
PTXRAG_ISOLATE=1 timeout 170 python3 -m pytest -m gpu tests/test_hostile_gpu.py -v -s -p no:cacheprovider \
  --timeout 120 2>&1 | tee "$OUT/hostile.txt" | grep -E "PASSED|FAILED|ERROR|passed|failed|->" | cut -c1-240
timeout 190 python3 -m pytest -m gpu tests/test_corpus_units_gpu.py -v -s -p no:cacheprovider -k "not ($first)" 2>&1 \
  | tee "$OUT/units-b.txt" | grep -E "^tests.*(PASSED|FAILED|ERROR)|passed|failed" | cut -c1-240
