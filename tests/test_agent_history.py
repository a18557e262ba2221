"""History modes keep every suite task's 8-round episode within the model's context window."""

from __future__ import annotations

import pytest

from ptxrag.agent_graph import builtin_conditions, count_tokens, load_condition
from ptxrag.agent_graph.history import largest_request_tokens
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context
from ptxrag.agent_graph.models import DEFAULT_CONTEXT_WINDOW_TOKENS, DEFAULT_MAX_OUTPUT_TOKENS
from ptxrag.agent_graph.prompts import system_prompt, task_prompt
from ptxrag.tasks import list_tasks


def _largest(cond, task, pack):
    static = build_static_context(cond, task, pack)
    return largest_request_tokens(
        cond.history,
        system_tokens=count_tokens(system_prompt(static)),
        task_prompt_tokens=count_tokens(task_prompt(task, None)),
        retrieval_tokens=cond.retrieval_budget_tokens,
        max_output_tokens=DEFAULT_MAX_OUTPUT_TOKENS,
        max_rounds=8,
    )


@pytest.mark.parametrize("name", builtin_conditions())
def test_default_history_keeps_eight_rounds_within_the_context_window(name):
    cond = load_condition(name)
    assert cond.history.mode == "summary"
    pack = CorpusKnowledge()
    worst = max(_largest(cond, t, pack) for t in list_tasks())
    assert worst <= DEFAULT_CONTEXT_WINDOW_TOKENS, (name, worst)


def test_full_history_would_not_fit_so_the_default_matters():
    cond = load_condition("rag+templates").with_history("full")
    pack = CorpusKnowledge()
    worst = max(_largest(cond, t, pack) for t in list_tasks())
    assert worst > DEFAULT_CONTEXT_WINDOW_TOKENS


def test_a_huge_compiler_log_is_capped_in_the_feedback_prompt():
    from test_agent_doubles import report

    from ptxrag.agent_graph.history import FEEDBACK_OVERHEAD_TOKENS
    from ptxrag.agent_graph.prompts import MAX_FEEDBACK_TOKENS, feedback_prompt
    from ptxrag.agent_graph.state import RoundRecord
    from ptxrag.sandbox.results import CompileResult

    rep = report("warp-reduce-redux", "compile")
    log = "\n".join(f"kernel.cu({i}): error: identifier undefined_{i} is undefined" for i in range(3000))
    rep = rep.model_copy(update={"compile": CompileResult(status="failed", message="compile error", log=log)})
    rec = RoundRecord(round=1, prompt="p", reply="r", code="c", report=rep, outcome="compile failed")
    assert count_tokens(rep.feedback()) > 5 * MAX_FEEDBACK_TOKENS  # the log really is huge
    prompt = feedback_prompt(rec, None)
    assert count_tokens(prompt) <= MAX_FEEDBACK_TOKENS + FEEDBACK_OVERHEAD_TOKENS
    assert "cut here" in prompt and "undefined_0 " in prompt


def test_a_replay_model_answers_by_round_even_when_history_is_summarized(tmp_path):
    """The request resends only some rounds; the replay still gives round k its k-th reply, because the
    agent passes the episode's reply count in the call's metadata."""
    from test_agent_doubles import PackDouble, ScriptedSandbox, kernel_reply

    from ptxrag.agent_graph import ReplayChatModel, run_task

    replay = ReplayChatModel.from_replies([kernel_reply(f"v{i}") for i in range(1, 6)])
    cond = load_condition("templates").with_history("summary", keep_rounds=1)
    res = run_task(
        "warp-reduce-redux", model=replay, condition=cond, sandbox=ScriptedSandbox(["compile"] * 4 + ["success"]),
        knowledge=PackDouble(), runs_dir=tmp_path, max_rounds=5,
    )  # fmt: skip
    assert res.stop_reason == "solved"
    assert [f"// v{r.round}" in (r.code or "") for r in res.rounds] == [True] * 5
    assert res.rounds[4].rounds_summarized == [1, 2, 3]


def test_verdicts_do_not_repeat_a_status_their_message_already_says():
    from test_agent_doubles import report

    from ptxrag.agent_graph.prompts import verdict_text
    from ptxrag.sandbox.results import TimingResult

    rep = report("warp-reduce-redux", "unverified")
    rep = rep.model_copy(update={"timing": TimingResult(status="skipped", message="skipped: no GPU")})
    text = verdict_text(rep)
    assert "[timing] skipped: no GPU" in text and "skipped: skipped" not in text


def test_build_request_keeps_the_task_and_the_last_rounds():
    from langchain_core.messages import SystemMessage

    from ptxrag.agent_graph.conditions import HistorySettings
    from ptxrag.agent_graph.history import build_request
    from ptxrag.agent_graph.state import RoundRecord

    rounds = [
        RoundRecord(round=i, prompt=f"prompt {i}", reply=f"reply {i}", code=None, outcome=f"outcome {i}")
        for i in range(1, 5)
    ]
    req = build_request(
        SystemMessage("sys"), rounds, "prompt 5", HistorySettings(mode="summary", keep_rounds=2)
    )
    assert req.rounds_resent == [3, 4] and req.rounds_summarized == [1, 2]
    texts = [m.content for m in req.messages]
    assert texts[0] == "sys" and texts[-1] == "prompt 5" and texts[2] == "reply 3"
    assert texts[1].startswith("prompt 1") and "- round 2: no usable code; verdict: outcome 2" in texts[1]
    assert texts[1].rstrip().endswith("prompt 3")
    full = build_request(SystemMessage("sys"), rounds, "prompt 5", HistorySettings(mode="full"))
    assert full.rounds_resent == [1, 2, 3, 4] and len(full.messages) == 10
