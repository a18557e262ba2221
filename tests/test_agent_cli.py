"""``ptxrag demo`` and ``ptxrag run`` through the CLI runner, with the real graph and sandbox."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from typer.testing import CliRunner

from ptxrag.cli import app

runner = CliRunner()
DEMO = Path(str(resources.files("ptxrag.agent_graph") / "demo" / "warp-reduce-redux.toml"))


def _no_gpu(monkeypatch):
    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    from ptxrag.sandbox import toolchain

    toolchain.detect_gpu.cache_clear()


def test_demo_runs_offline_and_behaves_as_designed(monkeypatch, tmp_path):
    _no_gpu(monkeypatch)
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "home"))  # no index here: the demo must say so
    res = runner.invoke(app, ["demo", "--runs-dir", str(tmp_path / "runs")])
    out = res.output
    assert res.exit_code == 0, out
    assert "falling back to static knowledge" in out
    assert "round 1: ✗ compile failed" in out and "Unknown modifier" in out
    assert "round 2: ✗ static failed: redux.sync not found" in out
    assert "skipped: no GPU" in out and "What a GPU run adds" in out
    assert "demo behaved as designed" in out
    transcripts = list((tmp_path / "runs").glob("*/transcript.jsonl"))
    assert len(transcripts) == 1
    rows = [json.loads(x) for x in transcripts[0].read_text().splitlines()]
    assert rows[-1]["stop_reason"] == "unverified_no_gpu"
    r3 = rows[3]["report"]
    assert r3["compile"]["status"] == "passed" and r3["static"]["status"] == "passed"
    assert {r3[s]["status"] for s in ("correctness", "execution", "timing")} == {"skipped"}


def test_run_with_a_user_condition_reaches_the_round_limit(monkeypatch, tmp_path):
    _no_gpu(monkeypatch)
    cond = tmp_path / "baseline.toml"
    cond.write_text('name = "baseline"\ndescription = "no knowledge at all"\n')
    replay = tmp_path / "two.toml"
    text = DEMO.read_text()
    replay.write_text(
        text[: text.index("[[reply]]", text.index("[[reply]]", text.index("[[reply]]") + 1) + 1)]
    )
    res = runner.invoke(
        app,
        ["run", "warp-reduce-redux", "--model", f"replay:{replay}", "--condition", str(cond), "--max-rounds", "2",
         "--runs-dir", str(tmp_path / "runs"), "--episode", "cli-ep"],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "round_limit" in res.output and "static 0 + retrieved 0" in res.output
    assert (tmp_path / "runs" / "cli-ep" / "transcript.md").is_file()


def test_run_without_an_api_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    res = runner.invoke(
        app,
        ["run", "warp-reduce-redux", "--model", "anthropic:claude-sonnet-4-5", "--condition", "templates"],
    )
    assert res.exit_code == 2
    assert "ANTHROPIC_API_KEY" in res.output and "replay:" in res.output


def test_run_with_an_unknown_condition_or_task(tmp_path):
    res = runner.invoke(
        app, ["run", "warp-reduce-redux", "--model", f"replay:{DEMO}", "--condition", "vibes"]
    )
    assert res.exit_code == 2 and "unknown condition" in res.output
    res = runner.invoke(app, ["run", "no-such-task", "--model", f"replay:{DEMO}"])
    assert res.exit_code == 2 and "unknown task" in res.output


def test_run_against_the_sandbox_service_over_http(monkeypatch, tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptxrag", "sandbox", "serve", "--port", str(port), "--state-dir", str(tmp_path / "svc")],
        env={**os.environ, "PTXRAG_NO_GPU": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the sandbox service did not start"
            time.sleep(0.2)
        res = runner.invoke(
            app,
            ["run", "warp-reduce-redux", "--model", f"replay:{DEMO}", "--condition", "templates", "--max-rounds", "3",
             "--sandbox", url, "--runs-dir", str(tmp_path / "runs"), "--json"],
        )  # fmt: skip
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)  # progress goes to stderr with --json
    outcomes = [r["outcome"].split(":")[0] for r in result["rounds"]]
    assert outcomes == [
        "compile failed",
        "static failed",
        "compile and static checks passed; GPU stages not run (skipped",
    ]
    assert result["stop_reason"] == "unverified_no_gpu"


def test_an_interrupted_run_prints_the_whole_command_that_resumes_it(monkeypatch, tmp_path):
    import shlex

    _no_gpu(monkeypatch)
    replay = tmp_path / "flaky.toml"
    replay.write_text('[[reply]]\nerror = "fatal"\ntext = "never"\n')
    runs = tmp_path / "my runs"
    res = runner.invoke(
        app,
        ["run", "warp-reduce-redux", "--model", f"replay:{replay}", "--condition", "hardware", "--max-rounds", "2",
         "--runs-dir", str(runs), "--episode", "ep-1", "--history", "last-k"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("resume with: "))
    args = shlex.split(line.removeprefix("resume with: "))
    assert args[:3] == ["ptxrag", "run", "warp-reduce-redux"]
    for flag, value in [("--model", f"replay:{replay}"), ("--condition", "hardware"), ("--max-rounds", "2"),
                        ("--runs-dir", str(runs)), ("--episode", "ep-1"), ("--history", "last-k")]:  # fmt: skip
        assert args[args.index(flag) + 1] == value
    # the printed command, run as it is, resumes the episode (the model answers now)
    replay.write_text(DEMO.read_text())
    again = runner.invoke(app, args[1:])
    assert again.exit_code == 1, again.output  # round limit: the demo's first two replies fail
    rows = [json.loads(x) for x in (runs / "ep-1" / "transcript.jsonl").read_text().splitlines()]
    assert rows[-1]["resumed"] is True and len([r for r in rows if r["type"] == "round"]) == 2


def test_episode_alone_resumes_as_the_episode_was_started(monkeypatch, tmp_path):
    _no_gpu(monkeypatch)
    replay = tmp_path / "flaky.toml"
    replay.write_text('[[reply]]\nerror = "fatal"\ntext = "never"\n')
    runs = tmp_path / "runs"
    first = runner.invoke(
        app,
        ["run", "warp-reduce-redux", "--model", f"replay:{replay}", "--condition", "hardware", "--max-rounds", "2",
         "--budget", "5000", "--history", "full", "--runs-dir", str(runs), "--episode", "ep-2"],
    )  # fmt: skip
    assert first.exit_code == 2, first.output
    replay.write_text(DEMO.read_text())
    again = runner.invoke(app, ["run", "--episode", "ep-2", "--runs-dir", str(runs)])
    assert again.exit_code == 1, again.output  # resumed with the stored model, condition and limit: 2 rounds
    rows = [json.loads(x) for x in (runs / "ep-2" / "transcript.jsonl").read_text().splitlines()]
    assert rows[0]["budget_tokens"] == 5000 and rows[0]["history"]["mode"] == "full"
    assert rows[-1]["resumed"] is True and len([r for r in rows if r["type"] == "round"]) == 2
    missing = runner.invoke(app, ["run", "--episode", "nope", "--runs-dir", str(runs)])
    assert missing.exit_code == 2 and "no episode 'nope'" in missing.output
    half = runner.invoke(
        app, ["run", "--episode", "ep-2", "--model", f"replay:{replay}", "--runs-dir", str(runs)]
    )
    assert half.exit_code == 2 and "none of them" in half.output
