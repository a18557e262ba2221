"""Routing through the real graph with a replay model and a scripted sandbox: success at round k, the
round limit, model errors (transient and fatal), sandbox errors, replies without code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_agent_doubles import ManualRetrieverDouble, PackDouble, ScriptedSandbox, kernel_reply

from ptxrag.agent_graph import ReplayChatModel, ReplayEntry, RetryPolicy, run_task
from ptxrag.agent_graph.models import ChatModel

FAST = RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.02)


def _run(tmp_path, replies, verdicts, *, condition="templates", max_rounds=8, retriever=None, **kw):
    model = ReplayChatModel.from_replies(replies)
    sandbox = ScriptedSandbox(verdicts)
    res = run_task(
        "warp-reduce-redux",
        model=ChatModel(model, "replay:test", "replay", FAST),
        condition=condition,
        max_rounds=max_rounds,
        sandbox=sandbox,
        knowledge=PackDouble(),
        retriever=retriever,
        runs_dir=tmp_path,
        **kw,
    )
    return res, model, sandbox


@pytest.mark.parametrize("k", [1, 3])
def test_success_at_round_k_ends_the_episode(tmp_path, k):
    replies = [kernel_reply(f"v{i}") for i in range(1, 6)]
    res, model, sandbox = _run(tmp_path, replies, ["compile"] * (k - 1) + ["success"])
    assert res.stop_reason == "solved" and res.success
    assert len(res.rounds) == k and res.best_round == k and model.calls == k
    assert f"// v{k}" in sandbox.seen[-1]
    assert [r.outcome.split()[0] for r in res.rounds] == ["compile"] * (k - 1) + ["success"]


def test_round_limit_keeps_the_best_attempt(tmp_path):
    replies = [kernel_reply(f"v{i}") for i in range(1, 5)]
    res, model, _ = _run(tmp_path, replies, ["compile", "correctness", "static", "compile"], max_rounds=4)
    assert res.stop_reason == "round_limit" and not res.success
    assert len(res.rounds) == 4 and model.calls == 4
    assert res.best_round == 2 and res.best.outcome.startswith("correctness failed")


def test_feedback_of_round_k_is_in_the_prompt_of_round_k_plus_one(tmp_path):
    res, _, _ = _run(tmp_path, [kernel_reply("a"), kernel_reply("b")], ["static", "success"])
    p2 = res.rounds[1].prompt
    assert "Verdict on your round 1 kernel: static failed" in p2
    assert "`redux.sync` is not in the compiled SASS" in p2
    assert "ptxrag_abi.h" in res.rounds[0].prompt and "Write a CUDA kernel" in res.rounds[0].prompt


def test_gpu_stages_skipped_ends_unverified(tmp_path):
    res, model, _ = _run(tmp_path, [kernel_reply("a"), kernel_reply("b")], ["unverified"])
    assert res.stop_reason == "unverified_no_gpu" and len(res.rounds) == 1 and model.calls == 1
    assert "GPU stages not run" in res.rounds[0].outcome


def test_reply_without_code_is_a_round_with_feedback_not_a_crash(tmp_path):
    res, _, sandbox = _run(tmp_path, ["I'd rather explain warps.", kernel_reply("b")], ["success"])
    assert res.stop_reason == "solved" and len(res.rounds) == 2
    assert res.rounds[0].report is None and res.rounds[0].outcome.startswith("no code")
    assert "No kernel was evaluated" in res.rounds[1].prompt
    assert len(sandbox.seen) == 1


def test_transient_model_errors_are_retried(tmp_path):
    replies = [ReplayEntry(text=kernel_reply("a"), error="rate_limit", fail_first=2)]
    res, model, _ = _run(tmp_path, replies, ["success"])
    assert res.stop_reason == "solved" and model.calls == 3


def test_model_error_interrupts_and_the_episode_resumes(tmp_path):
    replies = [kernel_reply("a"), ReplayEntry(text=kernel_reply("b"), error="server_error", fail_first=99)]
    res, model, _ = _run(tmp_path, replies, ["compile", "success"], episode_id="ep-model")
    assert res.stop_reason == "model_error" and res.interrupted
    assert "503" in res.error or "server_error" in res.error
    assert len(res.rounds) == 1 and model.calls == 1 + FAST.attempts
    # the provider recovers: the same episode id resumes at round 2; round 1 is not redone
    res2, model2, sandbox2 = _run(
        tmp_path, [kernel_reply("a"), kernel_reply("b")], ["success"], episode_id="ep-model"
    )
    assert res2.resumed and res2.stop_reason == "solved"
    assert [r.round for r in res2.rounds] == [1, 2] and model2.calls == 1 and len(sandbox2.seen) == 1
    assert res2.rounds[0].reply == res.rounds[0].reply


def test_fatal_model_error_is_not_retried(tmp_path):
    res, model, _ = _run(tmp_path, [ReplayEntry(error="fatal")], ["success"])
    assert res.stop_reason == "model_error" and model.calls == 1 and res.rounds == []


@pytest.mark.parametrize("verdict", ["raise", "error"])
def test_sandbox_failure_interrupts_without_blaming_the_model(tmp_path, verdict):
    res, _, _ = _run(tmp_path, [kernel_reply("a"), kernel_reply("b")], ["compile", verdict])
    assert res.stop_reason == "sandbox_error" and res.interrupted
    assert len(res.rounds) == 1  # the round the sandbox could not judge is not recorded as the model's
    assert ("nvcc vanished" in res.error) if verdict == "raise" else ("ncu" in res.error)


def test_retrieval_condition_records_queries_sections_and_budget(tmp_path):
    r = ManualRetrieverDouble()
    res, _, _ = _run(
        tmp_path, [kernel_reply("a"), kernel_reply("b")], ["compile", "success"], condition="rag", retriever=r
    )
    r1, r2 = res.rounds
    assert r1.static_tokens == 0 and 0 < r1.retrieved_tokens <= res.budget_tokens
    assert r2.queries[0].reason == "compiler error"
    assert not {s.key for s in r1.retrieved.sections} & {s.key for s in r2.retrieved.sections}
    assert r1.retrieved.sections[0].title.lower() in r1.prompt.lower()
    lines = [json.loads(x) for x in Path(res.transcript_jsonl).read_text().splitlines()]
    assert [x["type"] for x in lines] == ["episode", "round", "round", "result"]
    assert lines[0]["budget_tokens"] == res.budget_tokens and lines[0]["tokenizer"] == "cl100k_base"
    md = Path(res.transcript_md).read_text()
    assert "## Round 2" in md and "compiler error" in md


def test_finished_episode_is_not_rerun(tmp_path):
    res, _, _ = _run(tmp_path, [kernel_reply("a")], ["success"], episode_id="ep-done")
    res2, model2, sandbox2 = _run(tmp_path, [kernel_reply("zzz")], ["compile"], episode_id="ep-done")
    assert res2.resumed and res2.stop_reason == "solved" and model2.calls == 0 and sandbox2.seen == []


def test_resuming_with_another_condition_is_refused(tmp_path):
    from ptxrag.agent_graph import EpisodeMismatch

    _run(tmp_path, [kernel_reply("a")], ["success"], episode_id="ep-x")
    with pytest.raises(EpisodeMismatch, match="condition"):
        _run(tmp_path, [kernel_reply("a")], ["success"], episode_id="ep-x", condition="hardware")


def test_parallel_episodes_share_one_checkpoint_database(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int):
        return _run(
            tmp_path,
            [kernel_reply(f"p{i}"), kernel_reply("q")],
            ["compile", "success"],
            episode_id=f"par-{i}",
        )[0]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(6)))
    assert all(r.stop_reason == "solved" and len(r.rounds) == 2 for r in results)
    assert len({r.checkpoint_db for r in results}) == 1
    assert [f"// p{i}" in r.rounds[0].code for i, r in enumerate(results)] == [True] * 6
