"""Agent retrieval leaves its budget unused below the relevance threshold and says so."""

from __future__ import annotations

from test_agent_doubles import HitDouble

from ptxrag.agent_graph.conditions import load_condition
from ptxrag.agent_graph.retrieval import RELEVANCE_RATIO, retrieve_context
from ptxrag.agent_graph.state import RetrievalQuery, ShownSection
from ptxrag.tasks import load_task


class _Fixed:
    """Hits with fixed scores for every query; honours k and exclude_sections like the real one."""

    def __init__(self, scored: list[tuple[str, float]]) -> None:
        self.scored = scored

    def version_for_arch(self, arch: str) -> str:
        return "9.1"

    def search(self, query, k=5, *, version=None, sources=None, exclude_sections=()):  # type: ignore[no-untyped-def]
        out = [
            HitDouble(n, f"title {n}", "9.1", "ptx-isa", "", s, f"text of {n} " * 20, breadcrumb=n)
            for n, s in self.scored
            if n not in exclude_sections
        ]
        return out[:k]


def _shown(number: str) -> ShownSection:
    return ShownSection(source="ptx-isa", version="9.1", section_number=number, title=number, tokens=10)


def test_sections_far_below_the_best_are_not_shown_and_the_note_says_so() -> None:
    cond, task = load_condition("rag"), load_task("warp-reduce-redux")
    retriever = _Fixed([("9.7.13.12", 2.0), ("9.7.13.9", 1.5), ("4.2", 0.3), ("13.20", 0.2)])
    got = retrieve_context(cond, task, [RetrievalQuery(text="redux.sync", reason="r")], retriever, [])
    assert [s.section_number for s in got.sections] == ["9.7.13.12", "9.7.13.9"]
    assert any("2 section(s) scored under" in n for n in got.notes)
    assert any("left unused" in n for n in got.notes)
    assert got.tokens < got.budget_tokens


def test_when_the_best_section_was_shown_before_unrelated_ones_do_not_fill_the_budget() -> None:
    cond, task = load_condition("rag"), load_task("warp-reduce-redux")
    retriever = _Fixed([("9.7.13.12", 2.0), ("4.2", 0.4), ("13.20", 0.3)])
    q = [RetrievalQuery(text="redux.sync", reason="compiler error")]
    got = retrieve_context(cond, task, q, retriever, [_shown("9.7.13.12")])
    assert got.sections == []
    assert any("its best section (9.7.13.12) was shown before" in n for n in got.notes)
    assert any("nothing new and relevant" in n for n in got.notes)


def test_relevant_new_sections_still_come_when_the_best_was_shown() -> None:
    cond, task = load_condition("rag"), load_task("warp-reduce-redux")
    close = 2.0 * RELEVANCE_RATIO + 0.1
    retriever = _Fixed([("9.7.13.12", 2.0), ("9.7.13.9", close), ("4.2", 0.1)])
    got = retrieve_context(
        cond, task, [RetrievalQuery(text="q", reason="r")], retriever, [_shown("9.7.13.12")]
    )
    assert [s.section_number for s in got.sections] == ["9.7.13.9"]


class _Texts(_Fixed):
    """Like ``_Fixed``, each section with its own text."""

    def __init__(self, scored: list[tuple[str, float, str]]) -> None:
        super().__init__([(n, s) for n, s, _ in scored])
        self.texts = {n: t for n, _, t in scored}

    def search(self, query, k=5, *, version=None, sources=None, exclude_sections=()):  # type: ignore[no-untyped-def]
        out = super().search(query, k, version=version, sources=sources, exclude_sections=exclude_sections)
        return [HitDouble(h.section_number, h.title, h.version, h.source, h.url, h.score,
                          self.texts[h.section_number], breadcrumb=h.breadcrumb) for h in out]  # fmt: skip


def test_the_statements_sections_that_name_none_of_the_tasks_instructions_are_left_out() -> None:
    """Round 1 on warp-reduce-redux asked its statement and got %nclusterid, WMMA storage and ldmatrix at
    scores close to each other: relevance to the task, not to the query's own best, decides."""
    cond, task = load_condition("rag"), load_task("warp-reduce-redux")
    retriever = _Texts([
        ("10.13", 0.64, "Special register %nclusterid holds the number of clusters. " * 10),
        ("9.7.14.4.2", 0.56, "Matrix storage for WMMA fragments in registers. " * 10),
        ("9.7.13.12", 0.50, "redux.sync performs a reduction across the threads of a warp. " * 10),
        ("5.4", 0.45, "reduxion is not a word, and redux_ is no instruction. " * 10),
    ])  # fmt: skip
    statement = RetrievalQuery(text=task.statement[:300], reason="task statement")
    got = retrieve_context(cond, task, [statement], retriever, [])
    assert [s.section_number for s in got.sections] == ["9.7.13.12"]
    assert any("(the task statement): 3 section(s) naming none of the task's instructions (redux)" in n
               for n in got.notes)  # fmt: skip
    assert any("left unused" in n for n in got.notes)
    # an instruction's own query is not held to it: its sections are chosen by score alone
    named = retrieve_context(cond, task, [RetrievalQuery(text="redux.sync", reason="r")], retriever, [])
    assert [s.section_number for s in named.sections] == ["10.13", "9.7.14.4.2", "9.7.13.12", "5.4"]


def test_instruction_roots_are_specific_enough_to_tell_sections_apart() -> None:
    from ptxrag.agent_graph.queries import instruction_roots, mentions_any

    assert instruction_roots(load_task("warp-elect-sum")) == ["elect", "redux"]
    roots = instruction_roots(load_task("cluster-dsmem-rownorm"))
    assert roots == ["barrier", "st.async", "cp.async"]
    assert mentions_any("use cp.async.bulk.shared::cluster", roots)
    assert not mentions_any("cp.reduce and st.global only", ["st.async", "cp.async"])
