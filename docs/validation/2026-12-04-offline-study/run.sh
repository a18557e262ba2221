#!/usr/bin/env bash
# The recorded offline study of 2026-12-04: two scripted (replay) models x two conditions x two tasks x two
# samples, the real agent graph and the real sandbox (nvcc, cuobjdump) on a machine without a GPU.
# Run from the repository root: bash docs/validation/2026-12-04-offline-study/run.sh
set -euo pipefail
here=docs/validation/2026-12-04-offline-study
tmp="$(mktemp -d)"
python -m ptxrag --help >/dev/null
python "$here/make_replays.py" "$tmp/replays"
PTXRAG_NO_GPU=1 PTXRAG_HOME="$tmp/home" python -m ptxrag bench --out "$tmp/study" \
    --tasks warp-reduce-redux,warp-elect-sum --models "replay:$tmp/replays/a,replay:$tmp/replays/b" \
    --conditions templates,hardware --samples 2 --max-rounds 4 --workers 2 | tee "$tmp/bench.txt"
# keep the database and the transcripts (the report links them), not the LangGraph checkpoints
rm -rf "$here/study" && mkdir -p "$here/study"
cp "$tmp/study/bench.sqlite" "$here/study/"
(cd "$tmp/study" && find episodes -name 'transcript.md' -exec install -D {} "$OLDPWD/$here/study/{}" \;)
cp -r "$tmp/replays" "$here/study/replays"
python -m ptxrag report "$here/study"
python -m ptxrag export fixit "$here/study" --include-unverified
rm -f "$here"/study/bench.sqlite-wal "$here"/study/bench.sqlite-shm
cp "$tmp/bench.txt" "$here/bench-output.txt"
