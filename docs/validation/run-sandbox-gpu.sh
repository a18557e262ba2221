cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 -m pytest -m gpu tests/test_sandbox_gpu.py -v -s -p no:cacheprovider 2>&1 | tee $OUT/gpu-tests.txt | tail -15
python3 benchmarks/sandbox_bench.py --runs 5 2>&1 | tee $OUT/sandbox-bench.txt
python3 -m ptxrag tasks validate warp-reduce-redux bulk-copy-scale --stage-timeout 20 2>&1 | tee $OUT/validate-sandbox-tasks.txt | tail -30
