"""Study settings, deterministic episode ids, and the bench database's guarantees."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError
from test_bench_e2e import replay_dir
from typer.testing import CliRunner

from ptxrag.bench import BenchConfigError, BenchSpec, BenchStore, EpisodeKey, resolve, run_bench
from ptxrag.bench.records import RoundRow, episode_base
from ptxrag.bench.study_runner import _exclusive
from ptxrag.cli import app


def test_episode_ids_are_deterministic_and_distinct(tmp_path, monkeypatch):
    replays = replay_dir(tmp_path / "replays")
    spec = BenchSpec(
        tasks=["warp-reduce-redux"],
        models=[f"replay:{replays}"],
        conditions=["templates", "hardware"],
        samples=2,
    )
    ids = [e.episode_id for e in resolve(spec)]
    assert len(ids) == len(set(ids)) == 4
    assert ids == [e.episode_id for e in resolve(spec)]
    monkeypatch.chdir(tmp_path)  # the same replay folder named relatively: the same episodes
    rel = spec.model_copy(update={"models": ["replay:replays"]})
    assert [e.episode_id for e in resolve(rel)] == ids
    key = EpisodeKey(
        task_id="warp-reduce-redux", model="anthropic:claude-sonnet-4-5", condition="rag", sample=3
    )
    assert key.episode_id.startswith("warp-reduce-redux.rag.anthropic-claude-sonnet-4-5.s3.")
    assert key.episode_id != key.model_copy(update={"sample": 4}).episode_id
    ep = resolve(spec)[0]
    assert ep.model_spec == f"replay:{replays.resolve()}/warp-reduce-redux.toml"


def test_settings_errors_name_every_problem(monkeypatch):
    with pytest.raises(ValidationError, match="listed twice: hardware"):
        BenchSpec(tasks=["warp-reduce-redux"], models=["m:x"], conditions=["hardware", "hardware"])
    with pytest.raises(ValidationError):
        BenchSpec(tasks=[], models=["m:x"], conditions=["hardware"])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = BenchSpec(
        tasks=["warp-reduce-redux"],
        models=["anthropic:claude-sonnet-4-5", "openai:gpt-5"],
        conditions=["hardware"],
    )
    with pytest.raises(BenchConfigError) as e:
        resolve(spec)
    assert "ANTHROPIC_API_KEY is not set" in str(e.value) and "OPENAI_API_KEY is not set" in str(e.value)


def _round(eid: str, n: int, outcome: str = "x") -> RoundRow:
    return RoundRow(episode_id=eid, round=n, outcome=outcome, compiled=True, static_ok=False, correct=False,
                    executed=False, success=False, unverified=False)  # fmt: skip


def test_finishing_an_episode_twice_replaces_its_rounds(tmp_path):
    replays = replay_dir(tmp_path / "replays")
    (ep,) = resolve(
        BenchSpec(tasks=["warp-elect-sum"], models=[f"replay:{replays}"], conditions=["hardware"])
    )
    with BenchStore(tmp_path / "out") as store:
        assert store.add_pending([episode_base(ep)]) == 1
        assert store.add_pending([episode_base(ep)]) == 0  # known already: kept as it is
        row = store.mark_running(ep.episode_id)
        assert row.status == "running" and row.attempts == 1 and row.started_at
        store.finish(row.model_copy(update={"status": "interrupted", "rounds_used": 2}),
                     [_round(ep.episode_id, 1), _round(ep.episode_id, 2)])  # fmt: skip
        store.mark_running(ep.episode_id)
        store.finish(store.episode(ep.episode_id).model_copy(update={"status": "done", "rounds_used": 3}),
                     [_round(ep.episode_id, k, f"r{k}") for k in (1, 2, 3)])  # fmt: skip
        assert [r.outcome for r in store.rounds(ep.episode_id)] == ["r1", "r2", "r3"]
        e = store.episode(ep.episode_id)
        assert e.status == "done" and e.attempts == 2 and store.counts() == {"done": 1}
        store.check_settings({"max_rounds": "8"})
        store.check_settings({"max_rounds": "8", "budget_tokens": "4000"})
        with pytest.raises(BenchConfigError, match="max_rounds 8 \\(now 4\\)"):
            store.check_settings({"max_rounds": "4"})
    with pytest.raises(FileNotFoundError, match="holds no bench database"):
        BenchStore(tmp_path / "nothing", create=False)


def test_two_benches_on_one_folder_are_refused(tmp_path):
    replays = replay_dir(tmp_path / "replays")
    out = tmp_path / "out"
    out.mkdir()
    spec = BenchSpec(tasks=["warp-elect-sum"], models=[f"replay:{replays}"], conditions=["hardware"])
    with _exclusive(out), pytest.raises(BenchConfigError, match="another ptxrag bench is running"):
        run_bench(spec, out)
    assert not (out / "bench.sqlite").exists()
    assert os.listdir(out) == ["bench.lock"]


def test_report_and_export_on_a_folder_without_a_bench(tmp_path):
    for args in (["report", str(tmp_path)], ["export", "fixit", str(tmp_path)]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and "holds no bench database" in " ".join(res.output.split())


class RecordingRetriever:
    """A retriever double that finds nothing and records what it was asked (from several threads)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def version_for_arch(self, arch: str) -> str:
        return "9.1"

    def search(self, query, k=5, *, version=None, sources=None, exclude_sections=()):
        self.calls.append((query, version))
        return []


def test_retrieval_conditions_share_one_retriever_or_refuse_to_start(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    from ptxrag.sandbox import toolchain

    toolchain.detect_gpu.cache_clear()
    replays = replay_dir(tmp_path / "replays")
    spec = BenchSpec(
        tasks=["warp-elect-sum"], models=[f"replay:{replays}"], conditions=["rag", "hardware"], samples=2
    )
    # no index in this PTXRAG_HOME: refused before any episode starts, and nothing recorded as run
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(BenchConfigError, match="a condition retrieves, but: .*ptxrag index"):
        run_bench(spec, tmp_path / "out")
    with BenchStore(tmp_path / "out") as store:
        assert {e.status for e in store.episodes()} == {"pending"}
    retriever = RecordingRetriever()
    summary = run_bench(spec, tmp_path / "out", retriever=retriever, workers=4)
    assert summary.complete and summary.done == 4
    # two rag episodes, each retrieving in both of its rounds, all against the task's manual version
    assert retriever.calls and {v for _, v in retriever.calls} == {"9.1"}
    with BenchStore(tmp_path / "out") as store:
        rag = [e for e in store.episodes() if e.condition == "rag"]
        assert len(rag) == 2 and {e.rounds_used for e in rag} == {2}
