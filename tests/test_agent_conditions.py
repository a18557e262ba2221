"""Conditions are data; each builds the intended context within its token budget."""

from __future__ import annotations

import pytest
from test_agent_doubles import ManualRetrieverDouble, PackDouble

from ptxrag.agent_graph import ConditionError, builtin_conditions, count_tokens, load_condition
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context
from ptxrag.agent_graph.queries import task_queries
from ptxrag.agent_graph.retrieval import retrieve_context
from ptxrag.agent_graph.tokens import fit
from ptxrag.tasks import list_tasks, load_task

EXPECTED = {
    "hardware": (["hardware"], False),
    "templates": (["hardware", "templates"], False),
    "contracts": (["hardware", "templates", "contracts"], False),
    "rag": ([], True),
    "rag+templates": (["templates"], True),
}


def test_builtin_conditions_are_the_studys_five():
    assert set(EXPECTED) <= set(builtin_conditions())


SUITE = [t.id for t in list_tasks()]


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("task_id", SUITE)
def test_default_budget_carries_every_needed_layer_whole(name, task_id):
    """Each built-in condition's own budget holds, for every suite task, the whole part of each static
    layer the task's instructions need; nothing is ever cut."""
    task = load_task(task_id)
    cond = load_condition(name)
    pack = CorpusKnowledge()
    static = build_static_context(cond, task, pack)
    if not cond.static:
        assert static is None
        return
    assert static is not None and static.tokens <= cond.static_budget_tokens
    assert not any(s.truncated for s in static.sections)
    assert "cut here" not in static.text
    for layer in cond.static:
        needed = [d.doc_id for d in pack.documents(layer, task) if d.priority == 0]
        shown = {s.section_number for s in static.sections if s.source == layer}
        assert set(needed) <= shown, f"{layer}: {sorted(set(needed) - shown)} left out"
    assert not [n for n in static.notes if n.startswith("left out layer")]


def test_a_needed_layer_that_does_not_fit_is_left_out_whole_not_cut():
    task = load_task("gemm-wgmma-bf16")
    cond = load_condition("templates").with_budget(8000)
    static = build_static_context(cond, task, CorpusKnowledge())
    assert static is not None
    assert {s.source for s in static.sections} == {"hardware"}
    assert any("left out layer 'templates' whole" in n for n in static.notes)
    assert not any(s.truncated for s in static.sections)


def test_gemm_templates_carry_the_whole_bf16_wgmma_wrapper_and_its_descriptors():
    task = load_task("gemm-wgmma-bf16")
    static = build_static_context(load_condition("templates"), task, CorpusKnowledge())
    needed = {s.section_number.split(":")[-1] for s in static.sections if s.needed}
    assert {"ptxrag_sm90/wgmma.cuh", "ptxrag_sm90/wgmma_bf16.cuh", "ptxrag_sm90/tma.cuh"} <= needed
    assert not needed & {"ptxrag_sm90/wgmma_e4m3.cuh", "ptxrag_sm90/wgmma_f16.cuh"}  # not the task's dtype


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_condition_builds_its_layers_within_budget(name):
    task = load_task("warp-reduce-redux")
    cond = load_condition(name)
    layers, retrieves = EXPECTED[name]
    assert cond.static == layers and cond.retrieval.enabled == retrieves
    pack = PackDouble(words=150, per_layer=2)  # small layers: all of them fit
    static = build_static_context(cond, task, pack)
    total = 0
    if layers:
        assert static is not None
        assert static.tokens <= cond.static_budget_tokens == static.budget_tokens
        assert static.tokens == count_tokens(static.text)
        assert [s.source for s in static.sections] == [x for x in layers for _ in range(2)]  # order kept
        total += static.tokens
        huge = build_static_context(cond, task, PackDouble(words=20_000, per_layer=1))
        assert huge is not None and huge.sections == [] and huge.text == ""  # never a cut document
        assert len([n for n in huge.notes if "left out layer" in n]) == len(layers)
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


def test_contracts_without_a_rule_for_the_task_give_the_templates_prompt_and_a_fingerprint_says_so():
    from ptxrag.agent_graph.knowledge import context_fingerprint

    pack = CorpusKnowledge()
    fp = {}
    for name in ("templates", "contracts"):
        cond = load_condition(name)
        fps = {}
        for tid in ("warp-reduce-redux", "bulk-copy-scale"):
            fps[tid] = context_fingerprint(cond, build_static_context(cond, load_task(tid), pack))
        fp[name] = fps
    # the pack has no contract for redux.sync: the same prompt as templates, recognisably so
    assert fp["contracts"]["warp-reduce-redux"] == fp["templates"]["warp-reduce-redux"]
    assert fp["contracts"]["bulk-copy-scale"] != fp["templates"]["bulk-copy-scale"]


def test_static_fill_adds_whole_documents_only_when_asked():
    task = load_task("warp-reduce-redux")
    pack = CorpusKnowledge()
    plain = build_static_context(load_condition("templates"), task, pack)
    filled_cond = load_condition("templates").model_copy(update={"static_fill": True})
    filled = build_static_context(filled_cond, task, pack)
    assert all(s.needed for s in plain.sections)
    extra = [s for s in filled.sections if not s.needed]
    assert extra and filled.tokens <= filled_cond.static_budget_tokens
    assert not any(s.truncated for s in filled.sections) and "cut here" not in filled.text


def test_ampere_cp_async_is_not_matched_by_the_bulk_contracts():
    docs = CorpusKnowledge().documents("contracts", load_task("gemm-mma-sync-sm80"))
    assert docs == []


def test_unbuilt_index_says_once_what_to_run(tmp_path, monkeypatch):
    from ptxrag.agent_graph.retrieval import RetrievalUnavailable, default_retriever

    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(RetrievalUnavailable) as err:
        default_retriever()
    message = str(err.value)
    assert "no index under" in message
    assert message.count("ptxrag index") == 1, message
