"""The library API as another agent project uses it: plain callables and Runnables as the model, and
``build_graph().invoke`` with its input schema and a transcript."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from test_agent_doubles import PackDouble, ScriptedSandbox, kernel_reply

from ptxrag.agent_graph import AgentDeps, ModelConfigError, build_graph, run_task, transcript_markdown
from ptxrag.agent_graph.models import as_chat_model
from ptxrag.tasks import load_task


def _episode(tmp_path, model):
    return run_task(
        "warp-reduce-redux", model=model, condition="templates", sandbox=ScriptedSandbox(["static", "success"]),
        knowledge=PackDouble(), runs_dir=tmp_path,
    )  # fmt: skip


def test_a_plain_callable_is_a_model(tmp_path):
    seen = []

    def my_model(messages):
        seen.append(len(messages))
        return kernel_reply(f"call{len(seen)}")

    res = _episode(tmp_path, my_model)
    assert res.stop_reason == "solved" and len(res.rounds) == 2
    assert "// call2" in res.rounds[1].code and seen == [2, 4]  # system + prompt; then one round more
    assert res.model == "callable:my_model"


def test_a_runnable_lambda_returning_a_message_is_a_model(tmp_path):
    res = _episode(tmp_path, RunnableLambda(lambda msgs: AIMessage(content=kernel_reply(str(len(msgs))))))
    assert res.stop_reason == "solved" and "// 4" in res.rounds[1].code


def test_a_callable_returning_nonsense_is_a_model_error(tmp_path):
    res = _episode(tmp_path, lambda msgs: 42)
    assert res.stop_reason == "model_error" and "returned int" in (res.error or "")


def test_not_a_model_is_refused():
    with pytest.raises(ModelConfigError, match="callable"):
        as_chat_model(42)


def test_build_graph_invoke_takes_the_input_schema_and_gives_a_transcript():
    task = load_task("warp-reduce-redux")
    deps = AgentDeps(
        task=task,
        model=as_chat_model(lambda msgs: kernel_reply("g")),
        sandbox=ScriptedSandbox(["success"]),
        knowledge=PackDouble(),
    )
    graph = build_graph()
    assert set(graph.get_input_jsonschema()["properties"]) == {
        "task_id",
        "condition",
        "max_rounds",
        "model_label",
    }
    final = graph.invoke({"task_id": task.id, "condition": "templates", "max_rounds": 3}, context=deps)
    assert final["stop_reason"] == "solved" and final["condition"].name == "templates"
    assert final["model_label"] == "callable:<lambda>" and len(final["rounds"]) == 1
    md = transcript_markdown(final)
    assert "## Round 1: success" in md and "// g" in md and "condition: `templates`" in md


def test_the_block_choice_is_told_to_the_model_in_the_next_prompt(tmp_path):
    final, fallback = kernel_reply("final"), kernel_reply("fallback")
    body = lambda r: r[r.index("```cuda") :]  # noqa: E731
    two = f"Final version first, a fallback for comparison second.\n\n{body(final)}\nFallback:\n\n{body(fallback)}"
    res = run_task(
        "warp-reduce-redux", model=lambda msgs: two, condition="templates",
        sandbox=ScriptedSandbox(["static", "success"]), knowledge=PackDouble(), runs_dir=tmp_path,
    )  # fmt: skip
    r1, r2 = res.rounds
    assert "// final" in r1.code and "// fallback" not in r1.code
    assert "About your reply: 2 code blocks define ptxrag_launch; took block 1 of 2" in r2.prompt
    assert "'fallback'" in r2.prompt
