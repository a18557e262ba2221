"""Retrieval queries react to the last verdict, and sections are not shown twice."""

from __future__ import annotations

from test_agent_doubles import ManualRetrieverDouble, kernel_reply, report

from ptxrag.agent_graph import load_condition
from ptxrag.agent_graph.extract import extract_code
from ptxrag.agent_graph.queries import asm_instructions, compiler_errors, round_queries
from ptxrag.agent_graph.retrieval import retrieve_context
from ptxrag.agent_graph.state import RoundRecord
from ptxrag.tasks import load_task

TASK = load_task("warp-reduce-redux")
CODE = extract_code(kernel_reply("x")).code.replace("redux.sync.add.s32", "redux.sync.add.i32")


def _record(verdict: str) -> RoundRecord:
    return RoundRecord(
        round=1, prompt="p", reply="r", code=CODE, report=report(TASK.id, verdict), outcome=verdict
    )


def test_round_one_asks_for_the_required_instruction_and_the_task():
    qs = round_queries(TASK, None, 6)
    assert qs[0].text == "redux.sync"
    assert any(q.reason == "task statement" for q in qs)


def test_compiler_error_queries_name_the_instruction_from_the_code():
    qs = round_queries(TASK, _record("compile"), 6)
    assert qs[0].reason == "compiler error"
    assert "Unknown modifier '.i32'" in qs[0].text and "/tmp" not in qs[0].text
    assert qs[0].text.startswith("redux.sync.add.i32") or any(q.text == "redux.sync.add.i32" for q in qs)


def test_each_kind_of_failure_asks_something_different():
    seen = {}
    for verdict in ("compile", "static", "correctness", "execution"):
        qs = round_queries(TASK, _record(verdict), 6)
        seen[verdict] = [
            q for q in qs if q.reason not in ("task statement",) and not q.reason.startswith("required")
        ]
        assert seen[verdict], verdict
    assert "absent from the SASS" in seen["static"][0].reason
    assert (
        seen["correctness"][0].text.endswith("semantics") and "wrong result" in seen["correctness"][0].reason
    )
    assert any("predicate" in q.text for q in seen["execution"])
    texts = [tuple(q.text for q in v) for v in seen.values()]
    assert len(set(texts)) == len(texts)


def test_success_and_no_code_add_no_feedback_queries():
    ok = round_queries(TASK, _record("success"), 6)
    none = round_queries(TASK, RoundRecord(round=1, prompt="p", reply="r", code=None, outcome="no code"), 6)
    required = [q.text for q in round_queries(TASK, None, 6) if q.reason != "task statement"]
    assert [q.text for q in ok] == [q.text for q in none] == required == ["redux.sync"]


def test_asm_instructions_and_compiler_errors():
    code = 'asm volatile("{\\n .reg .pred p;\\n elect.sync %0|p, 0xffffffff;\\n}" : "=r"(x));\n' + CODE
    assert asm_instructions(code) == ["elect.sync", "redux.sync.add.i32"]
    log = (
        "ptxas /tmp/x.ptx, line 9; error   : Unknown modifier '.i32'\n"
        'candidate.cu(12): error: identifier "__redux" is undefined\nptxas fatal   : Ptx assembly aborted due to errors\n'
    )
    assert compiler_errors(log) == ["Unknown modifier '.i32'", 'identifier "__redux" is undefined']


def test_retrieval_never_repeats_a_section_and_stays_within_budget():
    cond = load_condition("rag")
    r = ManualRetrieverDouble()
    first = retrieve_context(cond, TASK, round_queries(TASK, None, 6), r, [])
    second = retrieve_context(cond, TASK, round_queries(TASK, _record("compile"), 6), r, first.sections)
    keys1 = {s.key for s in first.sections}
    assert keys1 and second.sections
    assert not keys1 & {s.key for s in second.sections}
    assert r.calls[-1]["exclude_sections"], "shown manual sections are passed to the retriever as exclusions"
    assert r.calls[0]["version"] == "9.1" and r.calls[0]["sources"] == ["ptx-isa", "contracts"]
    assert first.tokens <= cond.retrieval_budget_tokens and second.tokens <= cond.retrieval_budget_tokens
    repeat = cond.model_copy(
        update={"retrieval": cond.retrieval.model_copy(update={"repeat_sections": True})}
    )
    again = retrieve_context(repeat, TASK, round_queries(TASK, None, 6), r, first.sections)
    assert keys1 & {s.key for s in again.sections}


def test_compiler_messages_that_abbreviate_the_instruction_still_find_it_in_the_code():
    from ptxrag.agent_graph.queries import _instruction_for

    # ptxas names the base and the offending modifier, or only the token it could not parse
    assert _instruction_for("redux.f32", ["redux.sync.min.f32"], []) == "redux.sync.min.f32"
    assert _instruction_for("x64b", ["tcgen05.ld.sync.aligned.32x64b.x1.b32"], []) == (
        "tcgen05.ld.sync.aligned.32x64b.x1.b32"
    )
    assert _instruction_for("redux.f64", ["redux.sync.min.f32"], []) is None
    assert _instruction_for("foo", ["bar.baz"], []) is None


def test_the_task_statement_is_asked_in_round_one_only():
    """Its later hits are the next ones down a vague query's ranking, not knowledge the verdict asks for."""
    assert any(q.reason == "task statement" for q in round_queries(TASK, None, 6))
    for verdict in ("compile", "static", "correctness", "execution"):
        later = round_queries(TASK, _record(verdict), 6)
        assert later and not any(q.reason == "task statement" for q in later), verdict
        assert any(q.text == "redux.sync" for q in later), verdict  # the required instruction still is
