"""History handling as a study setting (``ptxrag bench --history``): one mode for every episode, or several
as a study axis with their own condition names, carried into each episode, the dry run, the resume check
and the report (with the budget axis beside it). Replay models and a scripted sandbox; nothing compiles."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from test_agent_doubles import ScriptedSandbox, kernel_reply
from typer.testing import CliRunner

from ptxrag.agent_graph.conditions import HistoryMode
from ptxrag.bench import BenchConfigError, BenchSpec, run_bench
from ptxrag.bench.study import EpisodeKey, HistoryModeName, resolve
from ptxrag.cli import app

runner = CliRunner()
TASK = "warp-reduce-redux"
ROUNDS = 4  # round 4 has three earlier rounds: summary resends two and summarizes one, full all three


def _replays(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    replies = "".join(f"[[reply]]\ntext = '''{kernel_reply(f'r{i}')}'''\n" for i in range(ROUNDS))
    (folder / f"{TASK}.toml").write_text(replies)
    return folder


def test_the_bench_spells_the_agents_history_modes():
    assert typing.get_args(HistoryModeName) == typing.get_args(HistoryMode)


def test_several_modes_are_an_axis_one_mode_applies_to_every_episode(tmp_path):
    model = f"replay:{_replays(tmp_path / 'r')}"
    axis = resolve(
        BenchSpec(tasks=[TASK], models=[model], conditions=["templates"], history=["full", "summary"])
    )
    assert [e.condition_name for e in axis] == ["templates/full", "templates/summary"]
    assert [e.history for e in axis] == ["full", "summary"] and len({e.episode_id for e in axis}) == 2
    (one,) = resolve(BenchSpec(tasks=[TASK], models=[model], conditions=["templates"], history=["full"]))
    (plain,) = resolve(BenchSpec(tasks=[TASK], models=[model], conditions=["templates"]))
    # one mode is a setting, not an axis: same name and id as without it, the mode still reaches the episode
    assert one.condition_name == plain.condition_name == "templates" and one.episode_id == plain.episode_id
    assert one.history == "full" and plain.history is None
    both = resolve(
        BenchSpec(tasks=[TASK], models=[model], conditions=["rag"], budgets=[8000, 16000], history=["full", "last-k"])
    )  # fmt: skip
    assert [e.condition_name for e in both] == [
        "rag@8k/full",
        "rag@8k/last-k",
        "rag@16k/full",
        "rag@16k/last-k",
    ]
    assert EpisodeKey(task_id="t", model="m", condition="c", sample=0, history="full").episode_id.startswith(
        "t.c-full.m.s0."
    )
    for bad in (["full", "full"], ["everything"], []):
        with pytest.raises(ValueError):
            BenchSpec(tasks=[TASK], models=[model], conditions=["templates"], history=bad)


def test_dry_run_prices_each_history_mode(tmp_path):
    from ptxrag.bench.plan import plan_bench

    spec = BenchSpec(tasks=[TASK], models=["anthropic:claude-sonnet-4-5"], conditions=["templates"],
                     history=["full", "summary"], max_rounds=ROUNDS)  # fmt: skip
    full, summary = plan_bench(spec).episodes
    assert (full.condition, summary.condition) == ("templates/full", "templates/summary")
    assert full.static_tokens == summary.static_tokens and full.input_tokens > summary.input_tokens
    res = runner.invoke(
        app,
        ["bench", "--dry-run", "--out", str(tmp_path / "s"), "--tasks", TASK, "--models",
         "anthropic:claude-sonnet-4-5", "--conditions", "templates", "--history", "full,last-k"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "templates/full" in res.output and "templates/last-k" in res.output
    res = runner.invoke(
        app,
        ["bench", "--dry-run", "--out", str(tmp_path / "s"), "--tasks", TASK, "--models",
         "anthropic:claude-sonnet-4-5", "--history", "all-of-it"],
    )  # fmt: skip
    assert res.exit_code == 2 and "invalid study settings" in res.output


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    base = tmp_path_factory.mktemp("hist")
    spec = BenchSpec(tasks=[TASK], models=[f"replay:{_replays(base / 'r')}"], conditions=["templates"],
                     budgets=[16000, 24000], history=["full", "summary"], max_rounds=ROUNDS)  # fmt: skip
    summary = run_bench(spec, base / "out", workers=1, sandbox=ScriptedSandbox(["static"]))
    assert summary.complete, summary
    return base / "out", spec


def _episodes(out: Path) -> dict[str, list[dict]]:
    """condition name -> the episode's transcript records (header first)."""
    from ptxrag.bench.store import BenchStore

    with BenchStore(out, create=False) as store:
        rows = store.episodes()
    return {
        r.condition: [json.loads(x) for x in (out / str(r.transcript_jsonl)).read_text().splitlines()]
        for r in rows
    }


def test_each_episode_ran_with_its_history_mode(study):
    out, _ = study
    eps = _episodes(out)
    assert set(eps) == {f"templates@{b}/{h}" for b in ("16k", "24k") for h in ("full", "summary")}
    for name, recs in eps.items():
        header, rounds = recs[0], [r for r in recs if r.get("type") == "round"]
        assert header["history"]["mode"] == name.split("/")[1] and len(rounds) == ROUNDS
    last = {name: [r for r in recs if r.get("type") == "round"][-1] for name, recs in eps.items()}
    for b in ("16k", "24k"):
        full, summ = last[f"templates@{b}/full"], last[f"templates@{b}/summary"]
        assert full["history_tokens"] > summ["history_tokens"] > 0  # round 1 summarized, not resent


def test_another_history_setting_on_the_same_folder_is_refused(study):
    out, spec = study
    with pytest.raises(BenchConfigError, match=r"history axis full,summary \(now full\)"):
        run_bench(
            spec.model_copy(update={"history": ["full"]}), out, workers=1, sandbox=ScriptedSandbox(["static"])
        )


def test_the_report_names_both_axes_and_each_episodes_budget(study, tmp_path):
    from ptxrag.bench import write_report

    out, _ = study
    md = Path(write_report(out, dest=tmp_path / "rep").markdown).read_text()
    assert "| history mode | study axis: full,summary |" in md
    assert "| context budget (tokens) | study axis: 16000,24000 |" in md
    # the cost table's budget is each episode's own on the axis, not the axis as a whole
    assert "| templates@16k/full (budget 16000) |" in md and "| templates@24k/summary (budget 24000) |" in md
    assert "budget axis" not in md
