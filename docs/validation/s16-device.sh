#!/usr/bin/env bash
# s16 (issue 16): on the H200 box, as root with its CUDA toolkit: (1) the compile jail, the now-contained binary tools and
# mutant builds (CPU tests of tests/test_compile_hardening.py); (2) two full evaluations with the mutation
# stage, whose mutants are now built in the jail (warp-reduce-redux: one required instruction; bulk-copy-scale);
# (3) a task whose shapes exceed the GPU is refused at load, with the GPU's memory use before and after.
# Everything under $OUT, incrementally; about 2 minutes.
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph-s16 PYTHONUNBUFFERED=1
log=$OUT/log.txt
echo "== $(date -u) $(id -u) $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader)" | tee $log
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_compile_hardening.py \
  -k "mutant or evades or cannot_see or its_uid or bomb or binary_tools" > $OUT/compile-hardening.txt 2>&1
echo "== $(date -u) compile hardening rc=$?" >> $log
for t in warp-reduce-redux bulk-copy-scale; do
  timeout 60 python3 -m ptxrag sandbox check ptxrag/tasks/suite/$t/solution.cu --task $t --json > $OUT/check-$t.json 2> $OUT/check-$t.err
  echo "== $(date -u) check $t rc=$?" >> $log
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); m=r['mutation']; print(sys.argv[2], 'success', r['success'], 'mutation', m['status'], m['message'][:300])" $OUT/check-$t.json $t >> $log 2>&1
done
mkdir -p /tmp/s16-tasks && rm -rf /tmp/s16-tasks/huge && cp -r ptxrag/tasks/suite/warp-reduce-redux /tmp/s16-tasks/huge
sed -i 's/^id = "warp-reduce-redux"/id = "huge"/; s/timing = { rows = 65536, cols = 1024 }/timing = { rows = 4000000, cols = 1000000 }/' /tmp/s16-tasks/huge/task.toml
nvidia-smi --query-gpu=memory.used --format=csv,noheader > $OUT/huge.txt
PTXRAG_TASKS_PATH=/tmp/s16-tasks timeout 30 python3 -m ptxrag sandbox check ptxrag/tasks/suite/warp-reduce-redux/solution.cu --task huge >> $OUT/huge.txt 2>&1
echo "rc=$?" >> $OUT/huge.txt
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $OUT/huge.txt
echo "== $(date -u) done" >> $log
