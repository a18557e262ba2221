"""Conditions are data; each builds the intended context within its token budget."""

from __future__ import annotations

import pytest
from test_agent_doubles import ManualRetrieverDouble, PackDouble

from ptxrag.agent_graph import ConditionError, builtin_conditions, count_tokens, load_condition
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context
from ptxrag.agent_graph.queries import task_queries
from ptxrag.agent_graph.retrieval import retrieve_context
from ptxrag.agent_graph.tokens import fit
from ptxrag.tasks import load_task

EXPECTED = {
    "hardware": (["hardware"], False),
    "templates": (["hardware", "templates"], False),
    "contracts": (["hardware", "templates", "contracts"], False),
    "rag": ([], True),
    "rag+templates": (["templates"], True),
}


def test_builtin_conditions_are_the_studys_five():
    assert set(EXPECTED) <= set(builtin_conditions())
    budgets = {load_condition(n).budget_tokens for n in EXPECTED}
    assert len(budgets) == 1, "static and retrieved context must get the same budget"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_condition_builds_its_layers_within_budget(name):
    task = load_task("warp-reduce-redux")
    cond = load_condition(name)
    layers, retrieves = EXPECTED[name]
    assert cond.static == layers and cond.retrieval.enabled == retrieves
    pack = PackDouble(words=900, per_layer=3)  # 3 x ~1,800 tokens per layer: more than any budget holds
    static = build_static_context(cond, task, pack)
    total = 0
    if layers:
        assert static is not None
        assert static.tokens <= cond.static_budget_tokens == static.budget_tokens
        assert static.tokens == count_tokens(static.text)
        assert {s.source for s in static.sections} <= set(layers)
        assert static.sections[0].source == layers[0]  # layer order kept
        total += static.tokens
    else:
        assert static is None and pack.asked == []
    if retrieves:
        got = retrieve_context(cond, task, task_queries(task), ManualRetrieverDouble(), [])
        assert got.sections, "retrieval found nothing for the task"
        assert got.tokens <= cond.retrieval_budget_tokens
        assert all(s.source == "ptx-isa" and s.query for s in got.sections)
        total += got.tokens
    assert total <= cond.budget_tokens


@pytest.mark.parametrize("name", ["hardware", "templates", "contracts", "rag+templates"])
def test_real_knowledge_pack_fits_and_puts_the_tasks_wrapper_first(name):
    task = load_task("warp-reduce-redux")
    cond = load_condition(name)
    static = build_static_context(cond, task, CorpusKnowledge())
    assert static is not None and 0 < static.tokens <= cond.static_budget_tokens
    if "templates" in cond.static:
        # the family that wraps redux.sync is shown whole even when the header is cut to the budget
        warp = [s for s in static.sections if s.section_number.endswith("warp.cuh")]
        assert warp and not warp[0].truncated
        assert "redux.sync" in static.text
    if "hardware" in cond.static:
        assert static.sections[0].source == "hardware"


def test_fit_cuts_whole_lines_and_says_so():
    text = "\n".join(f"line {i} " + "word " * 20 for i in range(200))
    f = fit(text, 300)
    assert f.truncated and f.tokens <= 300 and f.tokens == count_tokens(f.text)
    assert "cut here" in f.text and f.text.split("\n")[0] == text.split("\n")[0]
    assert fit("short", 300).text == "short"
    assert fit(text, 0).text == ""


def test_count_tokens_is_cl100k():
    assert count_tokens("hello world") == 2  # [15339, 1917] in cl100k_base
    assert count_tokens("") == 0


def test_user_defined_condition_from_a_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        'name = "contracts-only"\nstatic = ["contracts"]\nbudget_tokens = 3000\n[retrieval]\nenabled = true\n'
        "reserve_tokens = 1000\n"
    )
    c = load_condition(f)
    assert c.name == "contracts-only" and c.static_budget_tokens == 2000 and c.retrieval_budget_tokens == 1000


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('name = "x"\nstatic = ["hardware", "hardware"]\n', "repeat"),
        ('name = "x"\nstatic = ["gossip"]\n', "static"),
        ('name = "nothing"\n', "no knowledge at all"),
        ('name = "x"\nbudget_tokens = 10\nstatic = ["hardware"]\n', "budget_tokens"),
        ("name = ", "not valid TOML"),
    ],
)
def test_bad_condition_files_are_clear_errors(tmp_path, text, says):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConditionError, match=says):
        load_condition(f)


def test_unknown_condition_lists_the_builtin_ones():
    with pytest.raises(ConditionError, match="rag\\+templates"):
        load_condition("magic")


def test_contracts_condition_shares_the_budget_between_layers():
    task = load_task("bulk-copy-scale")  # its templates and contracts together exceed the budget
    static = build_static_context(load_condition("contracts"), task, CorpusKnowledge())
    by_source: dict[str, int] = {}
    for s in static.sections:
        by_source[s.source] = by_source.get(s.source, 0) + s.tokens
    assert set(by_source) == {"hardware", "templates", "contracts"}
    assert (
        min(by_source["templates"], by_source["contracts"])
        > 0.3 * (static.budget_tokens - by_source["hardware"]) / 2
    )
    assert any(s.section_number == "contract-mbarrier" for s in static.sections)
    assert any(s.section_number.endswith("mbarrier.cuh") for s in static.sections)


def test_water_fill_gives_unused_shares_to_the_others():
    from ptxrag.agent_graph.knowledge import _water_fill

    assert _water_fill({"a": 100, "b": 5000, "c": 5000}, 3000) == {"a": 100, "b": 1450, "c": 1450}
    assert _water_fill({"a": 10, "b": 20}, 3000) == {"a": 10, "b": 20}


def test_unbuilt_index_says_once_what_to_run(tmp_path, monkeypatch):
    from ptxrag.agent_graph.retrieval import RetrievalUnavailable, default_retriever

    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(RetrievalUnavailable) as err:
        default_retriever()
    message = str(err.value)
    assert "no index under" in message
    assert message.count("ptxrag index") == 1, message
