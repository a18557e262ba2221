"""The conditions shaped like the PTXBench study's prompt tags are data, and build the intended prompts:
architecture parameters only; the whole pack for the arch (contracts, hardware card, template header, debug
hints); the same plus the one pattern the task's required instructions call for."""

from __future__ import annotations

import pytest

from ptxrag.agent_graph import builtin_conditions, load_condition
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context, context_fingerprint
from ptxrag.corpus import contracts, pattern_for
from ptxrag.tasks import list_tasks, load_task

STUDY = {
    "study-arch-params": ["hardware"],
    "study-knowledge": ["contracts", "hardware", "templates", "hints"],
    "study-knowledge+pattern": ["contracts", "hardware", "templates", "hints", "patterns"],
}
SUITE = [t.id for t in list_tasks()]
PACK = CorpusKnowledge()


def test_the_study_conditions_are_builtin_data_files():
    assert set(STUDY) <= set(builtin_conditions())
    for name, layers in STUDY.items():
        cond = load_condition(name)
        assert cond.static == layers and not cond.retrieval.enabled
        assert cond.source_file == f"builtin:{name}"
        assert cond.static_fill == (name != "study-arch-params")


@pytest.mark.parametrize("name", sorted(STUDY))
@pytest.mark.parametrize("task_id", SUITE)
def test_each_study_condition_carries_its_layers_whole_for_every_suite_task(name, task_id):
    task = load_task(task_id)
    cond = load_condition(name)
    static = build_static_context(cond, task, PACK)
    assert static is not None and 0 < static.tokens <= cond.static_budget_tokens
    assert not [n for n in static.notes if n.startswith("left out")], static.notes
    shown = {(s.source, s.section_number) for s in static.sections}
    for layer in cond.static:
        offered = {(layer, d.doc_id) for d in PACK.documents(layer, task)}
        if cond.static_fill or layer == "hardware":
            assert offered <= shown, f"{layer}: {sorted(offered - shown)} left out"


def test_study_knowledge_is_the_same_pack_for_every_task_of_an_arch():
    """Like the study's tag, the prompt does not depend on the task (only its order does: what the task
    needs comes first)."""
    cond = load_condition("study-knowledge")
    seen = {}
    for task in list_tasks():
        static = build_static_context(cond, task, PACK)
        seen.setdefault(task.arch, set()).add(
            frozenset((s.source, s.section_number) for s in static.sections)
        )
    assert len(seen["sm_90a"]) == 1
    (sections,) = seen["sm_90a"]
    assert {s for s, _ in sections} == {"contracts", "hardware", "templates", "hints"}
    assert {n for s, n in sections if s == "contracts"} == {d.doc_id for d in contracts()}


def test_contracts_beyond_the_task_are_offered_only_to_fill():
    task = load_task("warp-reduce-redux")  # no contract concerns redux.sync
    docs = PACK.documents("contracts", task)
    assert docs and all(d.priority == 1 for d in docs)
    needed = PACK.documents("contracts", load_task("bulk-copy-scale"))
    assert [d for d in needed if d.priority == 0] and [d for d in needed if d.priority == 1]
    # the plain contracts condition (no fill) still shows only what the task needs
    plain = build_static_context(load_condition("contracts"), task, PACK)
    assert not [s for s in plain.sections if s.source == "contracts"]
    assert any("'contracts': the knowledge pack has nothing" in n for n in plain.notes)


@pytest.mark.parametrize("task_id", SUITE)
def test_the_pattern_condition_adds_exactly_the_tasks_pattern(task_id):
    task = load_task(task_id)
    base = build_static_context(load_condition("study-knowledge"), task, PACK)
    with_p = build_static_context(load_condition("study-knowledge+pattern"), task, PACK)
    extra = [s for s in with_p.sections if s.source == "patterns"]
    expected = pattern_for(task.required_ptx, task.family)
    assert [s.section_number for s in extra] == ([expected.doc_id] if expected else [])
    assert [s for s in with_p.sections if s.source != "patterns"] == base.sections
    if expected is None:
        assert with_p.text == base.text
    else:
        assert with_p.tokens > base.tokens and expected.title in with_p.text


def test_the_patterns_layer_is_one_document_at_most():
    for task in list_tasks():
        assert len(PACK.documents("patterns", task)) <= 1
        assert len(PACK.documents("hints", task)) == (1 if task.arch == "sm_90a" else 0)


def test_arch_params_is_the_hardware_condition_under_the_studys_name():
    task = load_task("gemm-wgmma-bf16")
    a, h = load_condition("study-arch-params"), load_condition("hardware")
    fa = context_fingerprint(a, build_static_context(a, task, PACK))
    assert fa == context_fingerprint(h, build_static_context(h, task, PACK))


def test_retrieval_may_search_patterns_and_hints(tmp_path):
    f = tmp_path / "rag-patterns.toml"
    f.write_text(
        'name = "rag-patterns"\nstatic = []\n[retrieval]\nenabled = true\n'
        'sources = ["ptx-isa", "contracts", "patterns", "hints"]\n'
    )
    assert load_condition(f).retrieval.sources == ["ptx-isa", "contracts", "patterns", "hints"]
