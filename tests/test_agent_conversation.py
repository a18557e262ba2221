"""The loop against the real Anthropic and OpenAI SDKs (LangChain clients) talking to scripted loopback
servers in the real wire formats: per-layer token accounting, whole-layer inclusion in what the server
receives, cut-off replies, history modes, and the OpenAI output-limit field."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_providers import ScriptedProvider, Turn
from test_agent_doubles import ScriptedSandbox, kernel_reply

from ptxrag.agent_graph import RetryPolicy, count_tokens, load_condition, make_chat_model, run_task
from ptxrag.agent_graph.knowledge import CorpusKnowledge, render_item
from ptxrag.agent_graph.prompts import CONTINUE_PROMPT

FAST = RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.02)


def _anthropic(monkeypatch, turns, **kw):
    srv = ScriptedProvider("anthropic", turns, **kw)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    return srv, make_chat_model("anthropic:claude-test", retry=FAST)


def _openai(turns, **kw):
    srv = ScriptedProvider("openai", turns, **kw)
    return srv, make_chat_model(f"openai:qwen@{srv.url}/v1", retry=FAST)


def _run(tmp_path, model, verdicts, task="warp-reduce-redux", condition="templates", **kw):
    sandbox = ScriptedSandbox(verdicts)
    res = run_task(task, model=model, condition=condition, sandbox=sandbox, runs_dir=tmp_path, **kw)
    return res, sandbox


def test_per_layer_tokens_and_whole_layers_reach_the_anthropic_server(tmp_path, monkeypatch):
    srv, model = _anthropic(monkeypatch, [Turn(kernel_reply("a")), Turn(kernel_reply("b"))])
    try:
        res, _ = _run(tmp_path, model, ["static", "success"], task="gemm-wgmma-bf16", condition="contracts")
    finally:
        srv.close()
    assert res.stop_reason == "solved" and len(srv.requests) == 2
    static = res.static_context
    system = srv.sent_texts(0)[0][1]
    pack, task = CorpusKnowledge(), res.rounds[0]
    from ptxrag.tasks import load_task

    spec = load_task("gemm-wgmma-bf16")
    for layer in ("hardware", "templates", "contracts"):
        needed = [d for d in pack.documents(layer, spec) if d.priority == 0]
        assert needed
        for d in needed:  # every needed document reached the server whole
            assert render_item(d.title, d.text).strip() in system, d.doc_id
    # the record's per-layer tokens are the shown documents' tokens, layer by layer
    per_layer = {}
    for s in static.sections:
        per_layer[s.source] = per_layer.get(s.source, 0) + s.tokens
    assert task.layer_tokens == per_layer and set(per_layer) == {"hardware", "templates", "contracts"}
    assert res.context_tokens["templates"] == per_layer["templates"]
    assert sum(per_layer.values()) == pytest.approx(static.tokens, abs=len(static.sections))
    # the whole request was counted, and round 2 resent round 1 (within keep_rounds)
    r1, r2 = res.rounds
    assert r1.history_tokens == 0 and r2.history_tokens > count_tokens(r1.reply)
    assert r2.sent_tokens > r1.sent_tokens > static.tokens
    assert res.context_tokens["sent"] == r1.sent_tokens + r2.sent_tokens
    assert r1.model_stop_reason == "end_turn" and not r1.cut_off
    md = Path(res.transcript_md).read_text()
    assert f"templates {per_layer['templates']}" in md and "Context carried" in md


def _cut(text: str) -> str:
    return text[: text.index("extern")]  # the reply stops inside the code block


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_cut_off_reply_is_continued_and_joined(tmp_path, monkeypatch, kind):
    full = kernel_reply("joined")
    turns = [Turn(_cut(full), stop="cut"), Turn(full[full.index("extern") :]), Turn(kernel_reply("z"))]
    srv, model = _anthropic(monkeypatch, turns) if kind == "anthropic" else _openai(turns)
    try:
        res, sandbox = _run(tmp_path, model, ["success"])
    finally:
        srv.close()
    r = res.rounds[0]
    assert res.stop_reason == "solved" and len(srv.requests) == 2
    assert r.continuations == 1 and not r.cut_off
    assert r.model_stop_reason in ("end_turn", "stop")
    assert sandbox.seen == [r.code] and "// joined" in r.code and "ptxrag_launch" in r.code
    roles = srv.sent_texts(1)
    assert roles[-1] == ("user", CONTINUE_PROMPT)
    assert roles[-2][0] == "assistant" and roles[-2][1].rstrip() == _cut(full).rstrip()
    assert any("cut off at the output limit and continued 1" in n for n in r.extraction_notes)


def test_a_reply_still_cut_off_is_not_compiled_and_the_model_is_told(tmp_path, monkeypatch):
    cut = _cut(kernel_reply("long"))
    srv, model = _anthropic(
        monkeypatch, [Turn(cut, stop="cut"), Turn(cut, stop="cut"), Turn(kernel_reply("s"))]
    )
    try:
        res, sandbox = _run(tmp_path, model, ["success"])
    finally:
        srv.close()
    r1, r2 = res.rounds
    assert r1.cut_off and r1.model_stop_reason == "max_tokens" and r1.code is None and r1.report is None
    assert "cut off" in r1.outcome
    assert sandbox.seen == [r2.code]  # only round 2's code reached the sandbox
    assert "cut off at the output limit (stop reason `max_tokens`" in r2.prompt
    assert "shorter" in r2.prompt


def _history_run(tmp_path, mode, rounds=4):
    turns = [Turn(kernel_reply(f"v{i}")) for i in range(1, rounds + 1)]
    srv, model = _openai(turns)
    cond = load_condition("templates").with_history(mode, keep_rounds=1)
    try:
        res, _ = _run(tmp_path, model, ["compile"] * (rounds - 1) + ["success"], condition=cond)
    finally:
        srv.close()
    return res, srv


def test_full_history_resends_every_round(tmp_path):
    res, srv = _history_run(tmp_path, "full")
    last = srv.sent_texts(3)
    assert [role for role, _ in last] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert all(f"// v{i}" in "".join(t for _, t in last) for i in (1, 2, 3))
    assert [r.rounds_summarized for r in res.rounds] == [[], [], [], []]
    hist = [r.history_tokens for r in res.rounds]
    assert hist[0] == 0 and hist[1] < hist[2] < hist[3]


@pytest.mark.parametrize("mode", ["last-k", "summary"])
def test_windowed_history_keeps_the_task_and_the_last_round(tmp_path, mode):
    res, srv = _history_run(tmp_path, mode)
    last = srv.sent_texts(3)
    assert [role for role, _ in last] == ["system", "user", "assistant", "user"]
    first_user = last[1][1]
    assert "Required PTX instructions" in first_user  # the task statement is always resent
    assert "// v3" in last[2][1] and "// v1" not in "".join(t for _, t in last)
    if mode == "summary":
        assert "- round 1: a kernel of" in first_user and "- round 2:" in first_user
    else:
        assert "2 earlier round(s) left out" in first_user and "- round 1:" not in first_user
    assert res.rounds[3].rounds_summarized == [1, 2]
    # the history is counted: what was sent minus the system prompt and this round's prompt
    sent = sum(count_tokens(t) for _, t in last)
    assert res.rounds[3].sent_tokens == sent
    assert res.rounds[3].history_tokens == sent - count_tokens(last[0][1]) - count_tokens(last[-1][1])


def test_summary_history_costs_less_than_full(tmp_path):
    full, _ = _history_run(tmp_path / "f", "full", rounds=5)
    summ, _ = _history_run(tmp_path / "s", "summary", rounds=5)
    assert summ.rounds[4].history_tokens < full.rounds[4].history_tokens


def test_local_openai_server_gets_max_tokens(tmp_path):
    srv, model = _openai([Turn(kernel_reply("a"))])
    try:
        _run(tmp_path, model, ["success"])
    finally:
        srv.close()
    body = srv.requests[0]["json"]
    assert body["max_tokens"] == model.max_output_tokens and "max_completion_tokens" not in body


def test_a_400_naming_the_field_switches_to_the_other_one(tmp_path):
    def refuse(body):
        if "max_tokens" in body:
            return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        return None

    srv, model = _openai([Turn(kernel_reply("a")), Turn(kernel_reply("b"))], refuse=refuse)
    try:
        res, _ = _run(tmp_path, model, ["compile", "success"])
    finally:
        srv.close()
    assert res.stop_reason == "solved"
    fields = [("max_tokens" in r["json"], "max_completion_tokens" in r["json"]) for r in srv.requests]
    assert fields == [(True, False), (False, True), (False, True)]  # switched once, then kept
    assert model.max_tokens_param == "max_completion_tokens"


def test_a_400_about_something_else_is_not_retried_with_the_other_field(tmp_path):
    srv, model = _openai([Turn(status=400, error="messages: bad role")])
    try:
        res, _ = _run(tmp_path, model, ["success"])
    finally:
        srv.close()
    assert res.stop_reason == "model_error" and len(srv.requests) == 1


def test_a_continuation_request_is_counted_in_the_rounds_sent_tokens(tmp_path):
    full = kernel_reply("counted")
    srv, model = _openai([Turn(_cut(full), stop="cut"), Turn(full[full.index("extern") :])])
    try:
        res, _ = _run(tmp_path, model, ["success"])
    finally:
        srv.close()
    first = sum(count_tokens(t) for _, t in srv.sent_texts(0))
    second = sum(count_tokens(t) for _, t in srv.sent_texts(1))
    assert res.rounds[0].sent_tokens == first + second
