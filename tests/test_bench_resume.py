"""A bench killed mid-run (SIGKILL, in a subprocess) and run again: finished episodes are kept, the one cut
off resumes at its last completed round, the rest run, and nothing is duplicated."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from test_bench_e2e import CONDITIONS, TASKS, bench_args, no_gpu, replay_dir
from typer.testing import CliRunner

from ptxrag.cli import app

# The child runs the real bench on one worker (episodes in a known order) with the real sandbox, wrapped
# so that the 5th evaluation (episode 2, round 2) announces itself and hangs until the parent kills it.
CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from ptxrag.bench import BenchSpec, run_bench
    from ptxrag.sandbox import Sandbox

    class HangsOnFifth:
        def __init__(self):
            self.inner, self.calls, self.lock = Sandbox(gpu=False), 0, threading.Lock()
        def evaluate(self, task, source):
            with self.lock:
                self.calls += 1
                n = self.calls
            if n == 5:
                print("HANGING", flush=True)
                time.sleep(600)
            return self.inner.evaluate(task, source)

    spec = BenchSpec(tasks={tasks!r}, models=["replay:{replays}"], conditions={conditions!r}, max_rounds=4)
    run_bench(spec, {out!r}, workers=1, sandbox=HangsOnFifth())
    print("FINISHED", flush=True)
    """
)


def test_killed_bench_resumes_without_losing_or_duplicating_anything(tmp_path, monkeypatch):
    no_gpu(monkeypatch)
    replays = replay_dir(tmp_path / "replays")
    out = tmp_path / "out"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tasks=TASKS, conditions=CONDITIONS, replays=replays, out=str(out)))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env={**os.environ, "PTXRAG_NO_GPU": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the 5th evaluation hangs (or the child dies)
        assert line.strip() == "HANGING", line + proc.stdout.read()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    db = sqlite3.connect(out / "bench.sqlite")
    db.row_factory = sqlite3.Row
    before = {r["task_id"] + "/" + r["condition"]: dict(r) for r in db.execute("SELECT * FROM episodes")}
    first, cut = before["warp-reduce-redux/templates"], before["warp-reduce-redux/hardware"]
    assert first["status"] == "done" and first["rounds_used"] == 3
    assert cut["status"] == "running" and cut["attempts"] == 1  # killed in its round 2
    assert [before[f"warp-elect-sum/{c}"]["status"] for c in CONDITIONS] == ["pending", "pending"]
    transcript = out / "episodes" / cut["episode_id"] / cut["episode_id"] / "transcript.jsonl"
    cut_rows = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [x["type"] for x in cut_rows] == ["episode", "round"]  # round 1 on disk, round 2 not finished

    res = CliRunner().invoke(app, bench_args(out, replays))  # the same study, through the CLI
    assert res.exit_code == 0, res.output
    assert "1 already finished, 3 to run or resume" in res.output

    after = {r["task_id"] + "/" + r["condition"]: dict(r) for r in db.execute("SELECT * FROM episodes")}
    assert len(after) == 4 and {e["status"] for e in after.values()} == {"done"}
    assert after["warp-reduce-redux/templates"] == first  # untouched: not run again
    resumed = after["warp-reduce-redux/hardware"]
    assert resumed["attempts"] == 2 and resumed["resumed"] == 1 and resumed["rounds_used"] == 3
    assert resumed["started_at"] == cut["started_at"]
    n_rounds, n_distinct = db.execute(
        "SELECT COUNT(*), COUNT(DISTINCT episode_id || '/' || round) FROM rounds"
    ).fetchone()
    assert n_rounds == n_distinct == sum(e["rounds_used"] for e in after.values()) == 3 + 3 + 2 + 2
    rounds = [r["round"] for r in db.execute("SELECT round FROM rounds WHERE episode_id = ? ORDER BY round",
                                              (resumed["episode_id"],))]  # fmt: skip
    assert rounds == [1, 2, 3]
    # round 1 is the one written before the kill, not a second attempt at it
    replies = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [x["type"] for x in replies] == ["episode", "round", "round", "round", "result"]
    assert replies[1]["reply"] == cut_rows[1]["reply"]
    assert Path(out / resumed["transcript_md"]).is_file()
