"""A killed episode resumes at its last completed round: nothing completed is lost or asked again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from test_agent_doubles import PackDouble, ScriptedSandbox, kernel_reply

from ptxrag.agent_graph import ReplayChatModel, run_task

TESTS = Path(__file__).resolve().parent

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from test_agent_doubles import PackDouble, ScriptedSandbox, kernel_reply
    from ptxrag.agent_graph import ReplayChatModel, run_task

    class HangsInRound3(ScriptedSandbox):
        def evaluate(self, task, source):
            if len(self.seen) == 2:
                print("HANGING", flush=True)
                time.sleep(600)
            return super().evaluate(task, source)

    run_task("warp-reduce-redux", model=ReplayChatModel.from_replies([kernel_reply(f"v{{i}}") for i in (1, 2, 3)]),
             condition="templates", sandbox=HangsInRound3(["compile", "static", "success"]), knowledge=PackDouble(),
             episode_id="killed", runs_dir=Path({runs!r}))
    """
)


def _rounds_in(transcript: Path) -> int:
    if not transcript.is_file():
        return 0
    return sum(1 for line in transcript.read_text().splitlines() if json.loads(line)["type"] == "round")


def test_killed_episode_resumes_at_its_last_completed_round(tmp_path):
    runs = tmp_path / "runs"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(TESTS), runs=str(runs)))
    transcript = runs / "killed" / "transcript.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until round 3's evaluation hangs (or the child dies)
        assert line.strip() == "HANGING", line + proc.stdout.read()
        deadline = time.monotonic() + 30
        while _rounds_in(transcript) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    before = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [x["type"] for x in before] == ["episode", "round", "round"]

    model = ReplayChatModel.from_replies([kernel_reply(f"v{i}") for i in (1, 2, 3)])
    sandbox = ScriptedSandbox(["success"])
    res = run_task(
        "warp-reduce-redux", model=model, condition="templates", sandbox=sandbox, knowledge=PackDouble(),
        episode_id="killed", runs_dir=runs,
    )  # fmt: skip
    assert res.resumed and res.stop_reason == "solved"
    assert [r.round for r in res.rounds] == [1, 2, 3]
    assert [r.outcome.split()[0] for r in res.rounds] == ["compile", "static", "success"]
    assert res.rounds[0].reply == before[1]["reply"] and res.rounds[1].reply == before[2]["reply"]
    # round 3's reply was checkpointed before the kill: the model is not asked again, only the sandbox
    assert model.calls == 0 and len(sandbox.seen) == 1 and "// v3" in sandbox.seen[0]
    after = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [x["type"] for x in after] == ["episode", "round", "round", "round", "result"]
