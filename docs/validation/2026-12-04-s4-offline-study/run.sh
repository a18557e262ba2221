#!/usr/bin/env bash
# The recorded offline study of 2026-12-04 (session 4): two scripted (replay) models x three conditions
# (hardware, templates, rag+templates) x two history modes as a study axis (full, summary) x two tasks x two
# samples = 48 episodes, round limit 4: the real agent graph, the real retriever over an index of the PTX ISA
# 9.1 manual and the knowledge pack, and the real sandbox (nvcc, cuobjdump) on a machine without a GPU.
#
# Run from the repository root: bash docs/validation/2026-12-04-s4-offline-study/run.sh INDEX_HOME
# INDEX_HOME: a ptxrag data directory whose index holds PTX ISA 9.1 (`ptxrag corpus add ptx-isa --version 9.1
# --from PATH` and `ptxrag index --version 9.1` there); it is copied, never written.
set -euo pipefail
index_home="${1:?give a ptxrag data directory with an index of PTX ISA 9.1}"
here=docs/validation/2026-12-04-s4-offline-study
tmp="$(mktemp -d)"
mkdir -p "$tmp/home"
cp -r "$index_home/index" "$index_home/manuals" "$tmp/home/"
python -m ptxrag --help >/dev/null
python docs/validation/2026-12-04-offline-study/make_replays.py "$tmp/replays"
export PTXRAG_NO_GPU=1 PTXRAG_HOME="$tmp/home"
models="replay:$tmp/replays/a,replay:$tmp/replays/b"
study=(--tasks warp-reduce-redux,warp-elect-sum --models "$models" --conditions hardware,templates,rag+templates
       --history full,summary --samples 2 --max-rounds 4)
python -m ptxrag bench --out "$tmp/study" "${study[@]}" --dry-run > "$tmp/dry-run.txt"
start=$(date +%s)
python -m ptxrag bench --out "$tmp/study" "${study[@]}" --workers 2 | tee "$tmp/bench.txt"
echo "wall: $(( $(date +%s) - start )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$tmp/bench.txt"
# keep the database and the transcripts (the report links the .md; its context section reads the .jsonl),
# not the LangGraph checkpoints
rm -rf "$here/study" && mkdir -p "$here/study"
cp "$tmp/study/bench.sqlite" "$here/study/"
(cd "$tmp/study" && find episodes -name 'transcript.*' -exec install -D -m 644 {} "$OLDPWD/$here/study/{}" \;)
cp -r "$tmp/replays" "$here/study/replays"
python -m ptxrag report "$here/study"
python -m ptxrag export fixit "$here/study" --include-unverified
rm -f "$here"/study/bench.sqlite-wal "$here"/study/bench.sqlite-shm "$here"/study/bench.lock
cp "$tmp/bench.txt" "$here/bench-output.txt"
cp "$tmp/dry-run.txt" "$here/dry-run.txt"
