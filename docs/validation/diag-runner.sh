source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
for v in none NO_MONITOR NO_GATE "NO_MONITOR NO_GATE"; do
  unset PTXRAG_DIAG_NO_MONITOR PTXRAG_DIAG_NO_GATE
  for x in $v; do [ "$x" != none ] && export PTXRAG_DIAG_$x=1; done
  echo "== variant $v" | tee -a $OUT/diag.txt
  timeout 100 python3 docs/validation/integrity-smoke.py $OUT --no-mutation --refs warp-reduce-redux bulk-copy-scale 2>&1 | tee -a $OUT/diag.txt
  python3 -c "
import json
for l in list(open('$OUT/integrity-smoke.jsonl'))[-2:]:
    r=json.loads(l); print('   ', r['task'], r['stages']['timing'])" | tee -a $OUT/diag.txt
done
