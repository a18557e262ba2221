#!/usr/bin/env bash
# What the next session's device time should run first (written 2026-12-04, session 5). Each part is its own
# `run` call (600 s at most) with carry [".whl"]; every part leaves at most 7 files under $OUT (the device returns
# 8 per call). Issue the next call within 30 s of the last one's return, or the machine goes back and the next
# start costs a minute or more. Five parts do not fit in one session's 30 minutes: run 1 (closes issue 15, gives 16
# its record), then 4 (the attention backward pass, issue 20), then 2, 3, 5 (issue 21). Part 6 (session 6, issue 15:
# the integrity fixes made without a GPU and their new controls) goes right after 1; better still, run 6 FIRST:
# session 6 changed the GPU worker's memory pool and process lifecycle and added --no-device-link to the compile
# flags, none of it run on a GPU, and every later part depends on them.
# Session 7 (2026-12-05) ran parts 6, 1, 4, 2 and the hostile suite (2026-12-05-s7-gpu.txt). Next: PART=7 first
# (the two fixes made after those runs: the hostile test's warm-worker check and mutant_refuses' tell), then
# 3, then 5. Usage on the GPU box:
# Session 8 ran PART=7, 3 and 8 (2026-12-05-s8-gpu.txt; PART=8 checks the zombie fix). Open GPU work: the
# BW_DQ_BULK=1 attention-backward variant through the sandbox (10% faster, not the default yet) and throughput.
# Session 9 had no GPU lent; it wrote PART=9 (the process-creation filter, opt-in until PART=9 passes): run it first.
# Session 10 ran PART=9 (extended with profiled_helper.cu) and PART=10 (2026-12-05-s10-gpu.txt); the filter is on by
# default since. Next: PART=9 again (its two test expectations were changed after the run), then 3 (throughput).
# Session 11: PART=9, then 11 (the hostile suite, whose fork-bomb expectation changed in session 10), then 3.
# Session 11 got no device (every start between 12:45 and 15:14 UTC refused or failed): the same order stands.
# Session 12 ran PART=9, 11 and 3 on an H100 (2026-12-05-s12-gpu.txt): all passed. No GPU part is open.
# PART=1 bash docs/validation/run-gpu-next.sh   (1 to 11)
cd "$(dirname "$0")/../.."
source scripts/gpu-env.sh
export PTXRAG_HOME=/tmp/ph PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
# the filter needs libseccomp (nospawn.py); a bare device image may lack it: a copy carried in .whl/lib
nospawn_lib() {
  if ! ldconfig -p | grep -q libseccomp.so.2; then
    cp .whl/lib/libseccomp.so.2 /usr/lib/x86_64-linux-gnu/ && ldconfig && log "libseccomp: carried copy installed"
  else log "libseccomp: $(ldconfig -p | grep libseccomp.so.2 | head -1)"; fi
}
nospawn_lib  # the filter is on by default since session 10: every part needs it
case "${PART:-1}" in
1)  # issue 15: the kernels of the tasks that changed after their session-5 run: bulk-copy-scale (input_overwrite
    # was lost to the harness race), warp-elect-sum (its elect.sync minimum is now the task's own expression),
    # the attention forward tasks (controls regenerated with 3 stages); 4 lanes sharing the GPU as in session 5;
    # issue 16: its device record (s16-device.sh), tarred into one file
    T="bulk-copy-scale warp-elect-sum mha-fwd-lse-d128 mha-fwd-lse-d128-causal"
    for i in 0 1 2 3; do
      timeout 300 python3 docs/validation/integrity-smoke.py "$OUT" --lane "$i/4" --shared --log "lane-$i.jsonl" $T >> "$OUT/lanes.txt" 2>&1 &
    done
    wait; log "lanes done"
    python3 docs/validation/integrity-summary.py "$OUT"/lane-*.jsonl $T | tail -8 | tee -a "$OUT/log.txt"
    mkdir -p /tmp/s16-out && OUT=/tmp/s16-out timeout 240 bash docs/validation/s16-device.sh > /tmp/s16-out/stdout.txt 2>&1
    rc=$?; tar czf "$OUT/s16.tgz" -C /tmp s16-out; log "s16 rc=$rc"; cat /tmp/s16-out/log.txt ;;
2)  # issue 21: one candidate at a time, warm (per-stage split), then the mixed stream with one worker per
    # thread kept warm (StagedEvaluator concurrency, new in session 5)
    timeout 200 python3 benchmarks/sandbox_bench.py --runs 6 > "$OUT/bench-warm.txt" 2>&1
    rc=$?; log "sandbox_bench warm rc=$rc"; tail -12 "$OUT/bench-warm.txt"
    timeout 330 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 1 --limit 60 --log "$OUT/throughput-shared1.jsonl" > "$OUT/throughput-shared1.txt" 2>&1
    rc=$?; log "throughput shared=1 rc=$rc"; tail -6 "$OUT/throughput-shared1.txt" ;;
3)  # issue 21: checks sharing the GPU inside one process; the warm-worker GPU test with room to finish
    timeout 330 python3 benchmarks/sandbox_throughput.py --threads 4 --shared 3 --limit 60 --log "$OUT/throughput-shared3.jsonl" > "$OUT/throughput-shared3.txt" 2>&1
    rc=$?; log "throughput shared=3 rc=$rc"; tail -6 "$OUT/throughput-shared3.txt"
    timeout 200 python3 -m pytest -m gpu tests/test_sandbox_gpu.py -k warm_worker -v -s -p no:cacheprovider > "$OUT/warm-test.txt" 2>&1
    rc=$?; log "warm test rc=$rc"; tail -5 "$OUT/warm-test.txt" ;;
4)  # issue 20: the attention backward tasks (their own script, at most 7 files)
    if [ -f docs/validation/b20-device.sh ]; then
      OUT=$OUT timeout 580 bash docs/validation/b20-device.sh > "$OUT/stdout.txt" 2>&1
      rc=$?; log "b20 rc=$rc"
    else
      log "no docs/validation/b20-device.sh in this tree"
    fi ;;
5)  # issue 21: the service's warm sandboxes per uid (new in session 5) under the hostile suite, then the sandbox
    # GPU tests on one warm Sandbox
    timeout 330 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_hostile_gpu.py > "$OUT/hostile.txt" 2>&1
    rc=$?; log "hostile suite rc=$rc"; tail -15 "$OUT/hostile.txt"
    timeout 240 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_sandbox_gpu.py > "$OUT/sandbox-gpu.txt" 2>&1
    rc=$?; log "sandbox gpu tests rc=$rc"; tail -12 "$OUT/sandbox-gpu.txt" ;;
6)  # issue 15, session 6 (integrity holes found by reading the code, fixed without a GPU): the exposed memory
    # pool really keeps private tensors out of what the candidate maps (gpu test), then every reference,
    # control and alternative of the two tasks that got new controls plus bulk-copy-scale (the harness folder,
    # the retired checked process, the fresh timing process and the pool touch every kernel): all references
    # and alternatives must succeed (warp-elect-sum's now with an elect.sync mutant), every control fail where
    # declared: profiler_elect and mutant_refuses at mutation, first_call_forged_job at execution,
    # helper_process and vendor_lib_symlink at correctness. Then the warm cost (the timing stage now loads the library into a
    # fresh process) against session 4's 11.3 s median.
    timeout 120 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_worker_exposure.py > /tmp/exposure.txt 2>&1
    rc=$?; log "exposed pool gpu test rc=$rc"; tail -6 /tmp/exposure.txt | tee -a "$OUT/log.txt"
    T="warp-reduce-redux warp-elect-sum bulk-copy-scale"
    for i in 0 1 2 3; do
      timeout 330 python3 docs/validation/integrity-smoke.py "$OUT" --lane "$i/4" --shared --log "s6-lane-$i.jsonl" $T >> "$OUT/lanes.txt" 2>&1 &
    done
    wait; log "lanes done"
    python3 docs/validation/integrity-summary.py "$OUT"/s6-lane-*.jsonl $T | tail -10 | tee -a "$OUT/log.txt"
    timeout 150 python3 benchmarks/sandbox_bench.py --runs 4 > "$OUT/bench-warm-s6.txt" 2>&1
    rc=$?; log "sandbox_bench warm rc=$rc"; tail -8 "$OUT/bench-warm-s6.txt" ;;
7)  # session 7's fixes after its GPU runs: the hostile suite with its corrected leftover check (a warm
    # sandbox's worker and idle spares may stay, nothing else), then warp-reduce-redux's adversarial controls
    # (mutant_refuses must now fail at mutation, the others as declared)
    timeout 300 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_hostile_gpu.py > "$OUT/hostile.txt" 2>&1
    rc=$?; log "hostile suite rc=$rc"; tail -15 "$OUT/hostile.txt"
    timeout 240 python3 docs/validation/integrity-smoke.py "$OUT" --adversarial --no-refs --log s7-redux.jsonl warp-reduce-redux > "$OUT/redux.txt" 2>&1
    rc=$?; log "redux controls rc=$rc"
    python3 docs/validation/integrity-summary.py "$OUT"/s7-redux.jsonl warp-reduce-redux | tail -4 | tee -a "$OUT/log.txt" ;;
8)  # session 8: the zombie fix (a leftover of one job, killed by the sweep but not reaped, was counted against
    # the next job's candidate: the warm-worker GPU test failed and mutant_refuses failed at correctness after
    # helper_process in PART=7's one-sandbox run). All sandbox GPU tests, then warp-reduce-redux's controls in
    # one warm sandbox (helper_process right before mutant_refuses), references included
    timeout 240 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_sandbox_gpu.py tests/test_worker_exposure.py > "$OUT/sandbox-gpu.txt" 2>&1
    rc=$?; log "sandbox gpu tests rc=$rc"; tail -14 "$OUT/sandbox-gpu.txt"
    timeout 300 python3 docs/validation/integrity-smoke.py "$OUT" --adversarial --log s8-redux.jsonl warp-reduce-redux > "$OUT/redux.txt" 2>&1
    rc=$?; log "redux controls rc=$rc"
    python3 docs/validation/integrity-summary.py "$OUT"/s8-redux.jsonl warp-reduce-redux | tail -5 | tee -a "$OUT/log.txt" ;;
9)  # session 9 (written without a GPU: none was lent), run in session 10: the process-creation filter
    # (sandbox/gpu/nospawn.py), opt-in until this part and PART=10 pass. With PTXRAG_SANDBOX_NO_SPAWN=1: all
    # sandbox GPU tests (they must pass as without it: the CUDA driver, CUPTI and Nsight Compute's injection must
    # never create a process in the candidate's process), then warp-reduce-redux's reference (every stage, ncu
    # included), controls/reaped_helper.cu (fork + exec with a clean environment, reaped within the call: must
    # fail at correctness, SIGSYS), controls/profiled_helper.cu (session 10: redux.sync only in a helper process
    # started in the profiled launch, reaped within the call: must fail at execution) and helper_process.cu;
    # then the two helpers without the filter (the gap: both pass).
    nospawn_lib
    export PTXRAG_SANDBOX_NO_SPAWN=1
    timeout 240 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_sandbox_gpu.py tests/test_worker_exposure.py > "$OUT/sandbox-gpu-nospawn.txt" 2>&1
    rc=$?; log "sandbox gpu tests (no spawn) rc=$rc"; tail -14 "$OUT/sandbox-gpu-nospawn.txt"
    for flag in 1 0; do
      PTXRAG_SANDBOX_NO_SPAWN=$flag timeout 200 python3 - "$flag" >> "$OUT/reaped.txt" 2>&1 <<'PY'
import sys
from ptxrag.sandbox import Sandbox, SandboxConfig
from ptxrag.tasks import load_task
task = load_task("warp-reduce-redux")
cfg = SandboxConfig()
files = ["controls/reaped_helper.cu", "controls/profiled_helper.cu"]
if sys.argv[1] == "1":
    files = ["reference", *files, "controls/helper_process.cu"]
with Sandbox(cfg) as sb:
    for f in files:
        src = task.path(task.solution if f == "reference" else f).read_text()
        rep = sb.evaluate(task, src)
        ff = rep.first_failure
        print(f"no_spawn={cfg.forbid_process_creation} {f}: success={rep.success} failed_at={ff.stage if ff else None}", flush=True)
        for s in rep.stages():
            print(f"    {s.stage}: {s.status} {s.wall_s:.1f}s {s.message[:240]}", flush=True)
PY
    done
    log "helpers done"; cat "$OUT/reaped.txt" | tee -a "$OUT/log.txt" ;;
10) # session 10, the filter's second half: every task's reference through the sandbox with the filter (4 lanes
    # sharing the GPU; all must succeed: no kernel, library or profiler needs a process there), then the hostile
    # suite with it
    nospawn_lib
    export PTXRAG_SANDBOX_NO_SPAWN=1
    for i in 0 1 2 3; do
      timeout 330 python3 docs/validation/integrity-smoke.py "$OUT" --refs --lane "$i/4" --shared --log "s10-refs-$i.jsonl" >> "$OUT/lanes.txt" 2>&1 &
    done
    wait; log "refs done"
    python3 docs/validation/integrity-summary.py "$OUT"/s10-refs-*.jsonl | tail -8 | tee -a "$OUT/log.txt"
    timeout 240 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_hostile_gpu.py > "$OUT/hostile-nospawn.txt" 2>&1
    rc=$?; log "hostile suite (no spawn) rc=$rc"; tail -15 "$OUT/hostile-nospawn.txt" ;;
11) # session 11: the hostile suite with the filter on by default (its fork-bomb case now stops at the first fork)
    timeout 330 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_hostile_gpu.py > "$OUT/hostile.txt" 2>&1
    rc=$?; log "hostile suite rc=$rc"; tail -15 "$OUT/hostile.txt" ;;
esac
