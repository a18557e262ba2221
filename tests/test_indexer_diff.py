"""`corpus diff` pairs one section across versions by number, title or text: moved and renamed sections
are reported as renumbered, never as one removed and one added; unrelated sections are not paired."""

from __future__ import annotations

from ptxrag.indexer import diff_manuals
from ptxrag.indexer.schema import Manual, Section

_WORDS = [
    "the",
    "mbarrier",
    "object",
    "tracks",
    "the",
    "phase",
    "of",
    "pending",
    "arrivals",
    "and",
    "the",
    "transaction",
    "count",
    "of",
    "asynchronous",
    "copies",
    "issued",
    "by",
    "the",
    "bulk",
    "tensor",
    "engine",
    "before",
    "the",
    "waiting",
    "threads",
    "may",
    "observe",
    "the",
    "completed",
    "data",
]


def _body(seed: int, n: int = 40) -> str:
    """A distinct prose body: the same words in an order that depends on ``seed``."""
    return " ".join(_WORDS[(i * (seed + 2) + seed) % len(_WORDS)] for i in range(n)) + f" topic{seed}"


def _manual(version: str, *sections: tuple[str, str, str]) -> Manual:
    return Manual(
        version=version,
        format="markdown",
        origin="test",
        sections=tuple(Section(number=n, title=t, text=x) for n, t, x in sections),
    )


def _kinds(d) -> dict[str, tuple[str, str]]:
    out = {c.number: (c.kind, c.detail) for c in d.sections_changed}
    out.update({c.number: (c.kind, "") for c in d.sections_added})
    out.update({"-" + c.number: (c.kind, "") for c in d.sections_removed})
    return out


def test_inserted_section_shifts_the_rest_without_false_changes() -> None:
    old = _manual("1", ("1", "Alpha", _body(1)), ("2", "Beta", _body(2)))
    new = _manual("2", ("1", "Inserted", _body(3)), ("2", "Alpha", _body(1)), ("3", "Beta", _body(2)))
    d = diff_manuals(old, new)
    assert [c.number for c in d.sections_added] == ["1"]
    assert d.sections_removed == ()
    k = _kinds(d)
    assert k["2"] == ("renumbered", "was 1") and k["3"] == ("renumbered", "was 2")


def test_renamed_and_moved_section_is_paired_by_text() -> None:
    text = _body(4)
    old = _manual("1", ("3.1", "Old name", text), ("3.2", "Stays", _body(5)))
    new = _manual("2", ("3.2", "Stays", _body(5)), ("4.7", "New name", text + " one more sentence."))
    d = diff_manuals(old, new)
    assert d.sections_added == () and d.sections_removed == ()
    kind, detail = _kinds(d)["4.7"]
    assert kind == "renumbered"
    assert "was 3.1" in detail and "'Old name' -> 'New name'" in detail and "text changed" in detail


def test_unrelated_sections_are_not_paired() -> None:
    # different text under a different title and number: one removed, one added
    old = _manual("1", ("1", "Keep", _body(6)), ("2", "Gone", _body(7)))
    new = _manual("2", ("1", "Keep", _body(6)), ("5", "Fresh", _body(8)))
    d = diff_manuals(old, new)
    assert [c.number for c in d.sections_removed] == ["2"]
    assert [c.number for c in d.sections_added] == ["5"]


def test_short_identical_texts_do_not_pair_on_their_own() -> None:
    # a one-line body ("See below.") is too short to identify a section: no pairing on it
    old = _manual("1", ("2", "Gone", "See below."))
    new = _manual("2", ("9", "Fresh", "See below."))
    d = diff_manuals(old, new)
    assert len(d.sections_removed) == 1 and len(d.sections_added) == 1


def test_repeated_titles_pair_by_text() -> None:
    # two "Syntax" sections both move; each pairs with its own text, not by order
    a, b = _body(9), _body(10)
    old = _manual("1", ("1.1", "Syntax", a), ("2.1", "Syntax", b))
    new = _manual("2", ("7.1", "Syntax", b), ("8.1", "Syntax", a))
    k = _kinds(diff_manuals(old, new))
    assert k["7.1"] == ("renumbered", "was 2.1") and k["8.1"] == ("renumbered", "was 1.1")


def test_section_rewritten_in_place_is_changed() -> None:
    old = _manual("1", ("4", "Scope", _body(11)))
    new = _manual("2", ("4", "Scope and limits", _body(12)))
    d = diff_manuals(old, new)
    assert d.sections_added == () and d.sections_removed == ()
    kind, detail = _kinds(d)["4"]
    assert kind == "changed" and "title:" in detail and "text:" in detail


def test_repeated_title_with_unrelated_text_is_not_paired() -> None:
    # "Syntax" of a dropped instruction and "Syntax" of a new one are two sections, not one that moved
    old = _manual("1", ("1.1", "Syntax", _body(13)), ("2.1", "Syntax", _body(14)))
    new = _manual("2", ("2.1", "Syntax", _body(14)), ("7.1", "Syntax", _body(15)))
    d = diff_manuals(old, new)
    assert [c.number for c in d.sections_removed] == ["1.1"]
    assert [c.number for c in d.sections_added] == ["7.1"]
