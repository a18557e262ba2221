"""An end-to-end study through ``ptxrag bench``/``report``/``export fixit``: scripted models, the real graph and
the real sandbox (nvcc, cuobjdump) over two tasks and two conditions, GPU stages skipped."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.cli import app

TESTS = Path(__file__).resolve().parent
TASKS = ["warp-reduce-redux", "warp-elect-sum"]
CONDITIONS = ["templates", "hardware"]
runner = CliRunner()


def replay_dir(folder: Path) -> Path:
    """A ``replay:DIR`` model: one scripted trajectory per task. warp-reduce-redux: compile error, then the
    instruction missing from SASS, then compile+static pass; warp-elect-sum: elect.sync missing, then pass."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(str(resources.files("ptxrag.agent_graph") / "demo" / "warp-reduce-redux.toml")), folder)
    shutil.copy(TESTS / "fixtures" / "bench" / "warp-elect-sum.toml", folder)
    return folder


def bench_args(out: Path, replays: Path, *extra: str) -> list[str]:
    return [
        "bench", "--out", str(out), "--tasks", ",".join(TASKS), "--models", f"replay:{replays}",
        "--conditions", CONDITIONS[0], "--conditions", CONDITIONS[1], "--max-rounds", "4", *extra,
    ]  # fmt: skip


def no_gpu(mp: pytest.MonkeyPatch) -> None:
    mp.setenv("PTXRAG_NO_GPU", "1")
    from ptxrag.sandbox import toolchain

    toolchain.detect_gpu.cache_clear()


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """One bench run shared by this module's tests: (bench folder, replay dir, CLI output)."""
    base = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PTXRAG_HOME", str(tmp_path_factory.getbasetemp() / "ptxrag-home"))
        no_gpu(mp)
        replays = replay_dir(base / "replays")
        res = runner.invoke(app, bench_args(base / "out", replays, "--workers", "2"))
    assert res.exit_code == 0, res.output
    return base / "out", replays, res.output


def _db(out: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(out / "bench.sqlite")
    conn.row_factory = sqlite3.Row
    return conn


def test_every_episode_is_in_the_database_with_its_rounds(study):
    out, _, output = study
    assert "study: 4 episode(s); 0 already finished, 4 to run or resume" in output
    assert "4/4 finished (0 solved, 4 with GPU stages not run)" in output
    with _db(out) as db:
        eps = {(r["task_id"], r["condition"]): dict(r) for r in db.execute("SELECT * FROM episodes")}
        rounds = [dict(r) for r in db.execute("SELECT * FROM rounds ORDER BY episode_id, round")]
    assert set(eps) == {(t, c) for t in TASKS for c in CONDITIONS}
    for (task, _), e in eps.items():
        assert e["status"] == "done" and e["stop_reason"] == "unverified_no_gpu" and e["attempts"] == 1
        assert e["unverified"] == 1 and e["success"] == 0 and e["correct"] == 0 and e["static_ok"] == 1
        assert e["rounds_used"] == {"warp-reduce-redux": 3, "warp-elect-sum": 2}[task]
        assert e["first_static_round"] == e["rounds_used"] and e["solved_round"] is None
        assert e["input_tokens"] > 0 and e["output_tokens"] > 0 and e["cost_usd"] == 0.0
        assert (out / e["transcript_md"]).is_file() and (out / e["transcript_jsonl"]).is_file()
        assert e["episode_id"].startswith(f"{task}.{e['condition']}.replay-replays.s0.")
    assert len(rounds) == sum(e["rounds_used"] for e in eps.values())
    by_ep: dict[str, list[dict]] = {}
    for r in rounds:
        by_ep.setdefault(r["episode_id"], []).append(r)
    for e in eps.values():
        rs = by_ep[e["episode_id"]]
        assert [r["round"] for r in rs] == list(range(1, e["rounds_used"] + 1))
        assert rs[-1]["failure_stage"] is None and rs[-1]["unverified"] == 1
        assert all(r["code"] and r["report_json"] for r in rs)
        if e["task_id"] == "warp-reduce-redux":
            assert [r["failure_stage"] for r in rs[:2]] == ["compile", "static"]
            # the masked reason: no temp-file path, no line number, the complaint kept
            reason = rs[0]["failure_reason"]
            assert reason.startswith("compile failed: compile error: ptxas ") and "/tmp" not in reason
            assert reason.endswith(", line N; error : Unknown modifier '.i32'")
        else:
            assert rs[0]["failure_stage"] == "static" and "elect.sync not found" in rs[0]["failure_reason"]


def test_rerunning_the_same_command_skips_finished_episodes(study, monkeypatch):
    out, replays, _ = study
    no_gpu(monkeypatch)
    before = {r["episode_id"]: r["finished_at"] for r in _db(out).execute("SELECT * FROM episodes")}
    res = runner.invoke(app, bench_args(out, replays))
    assert res.exit_code == 0, res.output
    assert "4 already finished, 0 to run or resume" in res.output
    with _db(out) as db:
        after = {
            r["episode_id"]: (r["finished_at"], r["attempts"]) for r in db.execute("SELECT * FROM episodes")
        }
    assert {k: v[0] for k, v in after.items()} == before and {v[1] for v in after.values()} == {1}


def test_different_settings_on_the_same_folder_are_refused_and_change_nothing(study, monkeypatch):
    out, replays, _ = study
    no_gpu(monkeypatch)
    snapshot = [tuple(r) for r in _db(out).execute("SELECT * FROM episodes ORDER BY episode_id")]
    args = bench_args(out, replays)
    args[args.index("--max-rounds") + 1] = "6"
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "max_rounds 4 (now 6)" in text and "another --out" in text
    assert [tuple(r) for r in _db(out).execute("SELECT * FROM episodes ORDER BY episode_id")] == snapshot


def test_bad_study_settings_are_refused_before_anything_runs(tmp_path, monkeypatch):
    no_gpu(monkeypatch)
    replays = replay_dir(tmp_path / "replays")
    res = runner.invoke(
        app,
        ["bench", "--out", str(tmp_path / "out"), "--tasks", "warp-reduce-redux,no-such-task,bulk-copy-scale",
         "--models", f"replay:{replays}", "--conditions", "no-such-condition"],
    )  # fmt: skip
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "unknown task 'no-such-task'" in text and "unknown condition 'no-such-condition'" in text
    # the replay folder has no trajectory for this task (rich may wrap the line at the dash)
    assert "bulk-copy-scale.tomldoesnotexist" in "".join(res.output.split())
    assert not (tmp_path / "out").exists()


def test_report_writes_markdown_and_one_self_contained_html_page(study, tmp_path):
    out, _, _ = study
    res = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    page = (tmp_path / "rep" / "report.html").read_text()
    figures = sorted(p.name for p in (tmp_path / "rep" / "figures").glob("*.png"))
    assert figures == [
        "ablation.png", "cost.png", "failures.png", "pass_at_k.png", "per_task.png", "speedups.png",
        "success_at_round.png",
    ]  # fmt: skip
    for name in figures:
        assert f"](figures/{name})" in md
        assert (tmp_path / "rep" / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # self-contained: every image inline, nothing fetched from elsewhere; links only to the study's transcripts
    assert page.count('src="data:image/png;base64,') == 7
    assert not re.search(r'src="(?!data:)', page)
    links = re.findall(r'href="([^"]*)"', page)
    assert len(links) == 4 and all(x.endswith("/transcript.md") and not x.startswith("/") for x in links)
    assert all((tmp_path / "rep" / x).resolve().is_file() for x in links)  # relative to the report
    # the numbers of this study, in both renderings
    assert (
        "| templates | replay:replays | 2 | 100% (2/2) [34–100%] | 100% (2/2) [34–100%] | n/a (GPU not run) "
        "| n/a (GPU not run) | n/a (GPU not run) | 2 | 2.5 |" in md
    )
    assert "4 of 4 finished episode(s) never ran the GPU stages" in md and "never ran the GPU stages" in page
    assert (
        "| hardware | in SASS | 0% (0/2) [0–66%] | 50% (1/2) [9–91%] | 100% (2/2) [34–100%] | 100% (2/2) [34–100%] |"
        in md
    )
    assert (
        "| warp-elect-sum | hardware | 1 | 100% (1/1) [21–100%] | n/a (GPU not run) | n/a (GPU not run) |"
        in md
    )
    assert (
        "| replay:replays | in SASS | hardware | templates | 2 | 2 | 0 | 0 | 0 | +0.00 [-0.66, +0.66] | 1.000 |"
        in md
    )
    assert "| warp | static failed: elect.sync not found in the compiled SASS" in md
    assert "modifier '.i32' | 2 |" in md and "modifier &#x27;.i32&#x27;</td><td>2</td>" in page


def test_export_fixit_pairs_failed_attempts_with_the_later_fix(study, tmp_path):
    out, _, _ = study
    res = runner.invoke(app, ["export", "fixit", str(out), "-o", str(tmp_path / "verified.jsonl")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "verified.jsonl").read_text() == ""  # nothing ran on a GPU: no verified fix
    assert "4 episode(s) skipped" in res.output
    res = runner.invoke(app, ["export", "fixit", str(out), "--include-unverified"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (out / "fixit.jsonl").read_text().splitlines()]
    # warp-reduce-redux: rounds 1 and 2 fixed by round 3; warp-elect-sum: round 1 fixed by round 2; x2 conditions
    got = sorted(
        (r["task_id"], r["condition"], r["failed_round"], r["fixed_round"], r["failure_stage"]) for r in rows
    )
    want = sorted(
        [(t, c, 1, 3, "compile") for t in ["warp-reduce-redux"] for c in CONDITIONS]
        + [(t, c, 2, 3, "static") for t in ["warp-reduce-redux"] for c in CONDITIONS]
        + [(t, c, 1, 2, "static") for t in ["warp-elect-sum"] for c in CONDITIONS]
    )
    assert got == want
    for r in rows:
        assert r["format"] == "a-fixit/1" and r["verified"] is False
        assert "ptxrag_launch" in r["failed_code"] and "ptxrag_launch" in r["fixed_code"]
        assert r["failed_code"] != r["fixed_code"] and "```" not in r["explanation"] and r["explanation"]
        assert f"[{r['failure_stage']}] failed" in r["feedback"] and r["task_statement"] and r["required_ptx"]
    elect = next(r for r in rows if r["task_id"] == "warp-elect-sum")
    assert "elect.sync _|p" in elect["fixed_code"] and "elect.sync" not in elect["failed_code"]
    assert elect["explanation"].startswith("The verdict says elect.sync is not in the binary")
