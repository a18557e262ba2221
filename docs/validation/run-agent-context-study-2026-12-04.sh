#!/usr/bin/env bash
# The offline context study of 2026-12-04 (docs/validation/2026-12-04-agent-context-study.md): scripted
# (replay) models, the real graph, the real retriever over the PTX ISA 9.1 manual, the real sandbox with
# its GPU stages skipped (no GPU on this machine). Run from the repository root.
set -euo pipefail
W=${W:-/tmp/a18}
export PTXRAG_HOME=$W/home PTXRAG_NO_GPU=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$W/replays"
# the index: the 9.1 manual from ../shared plus the bundled knowledge pack
ptxrag corpus add ptx-isa --version 9.1 --from ../shared/corpus/ptx-isa-9.1
ptxrag index
# replays: the demo's warp-reduce-redux trajectory, the bench fixture for warp-elect-sum, and for the GEMM
# and the bulk copy the task's reference solution as the only reply (these show the context, not skill)
cp ptxrag/agent_graph/demo/warp-reduce-redux.toml tests/fixtures/bench/warp-elect-sum.toml "$W/replays/"
python - "$W/replays" <<'PY'
import sys
from ptxrag.tasks import load_task
for tid in ("gemm-wgmma-bf16", "bulk-copy-scale"):
    src = load_task(tid).solution_source()
    open(f"{sys.argv[1]}/{tid}.toml", "w").write(
        f"[[reply]]\ntext = '''Here is the kernel.\n\n```cuda\n{src}```\n'''\n")
PY
ARGS="--out $W/study --tasks warp-reduce-redux,warp-elect-sum,bulk-copy-scale,gemm-wgmma-bf16
      --models replay:$W/replays --conditions hardware,templates,contracts,rag,rag+templates
      --budgets 8k,16k,24k --max-rounds 4"
ptxrag bench --dry-run $ARGS
ptxrag bench $ARGS --workers 2
ptxrag report "$W/study"      # writes report.md (context section appended), report.html, context.md
