#!/usr/bin/env bash
# GPU validation run, third session of 2026-12-02, on the lent H200 with .whl/ carried (scripts/gpu-wheels.sh):
# the hostile suite through the service with isolation on (dedicated uid, empty network namespace), while the
# compile cache is warmed for the suite; then `ptxrag tasks validate --all` of the references (now written with
# the ptxrag_sm90.cuh wrappers) and their controls.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) ncu $(ncu --version | tail -1)"
python3 -c "import ptxrag.sandbox.service.server, uvicorn, tenacity, fastapi; print('service imports ok')" || exit 3
python3 scripts/precompile.py --jobs 12 > "$OUT/precompile.txt" 2>&1 &
pre=$!
PTXRAG_ISOLATE=1 timeout 175 python3 -m pytest -m gpu tests/test_hostile_gpu.py -v -s -p no:cacheprovider \
  --timeout 120 2>&1 | tee "$OUT/hostile.txt" | grep -E "PASSED|FAILED|ERROR|passed|failed|->" | cut -c1-240
wait $pre; tail -1 "$OUT/precompile.txt"
COLUMNS=240 timeout "${VALIDATE_TIMEOUT:-360}" python3 -m ptxrag tasks validate --all --stage-timeout 12 \
  --save-json "$OUT/tasks-validate.json" > "$OUT/tasks-validate.txt" 2>&1
echo "validate exit $?"; tail -60 "$OUT/tasks-validate.txt" | cut -c1-200
