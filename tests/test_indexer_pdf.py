"""The PDF loader on PDFs typeset with Typst from the shared Markdown manual (scripts/make_manual_pdf.py):
contents with dot leaders, chapters on new pages under "Chapter N.", running headers and footers, bold
labels on most pages, monospace syntax blocks, text flowing over page breaks. Every expectation is the
Markdown section the page was typeset from, never a recorded output."""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ptxrag.base.errors import ManualInputError, exit_code_for
from ptxrag.cli import app
from ptxrag.indexer import ManualFormatError, load_manual
from ptxrag.indexer.instructions import names_in_title
from ptxrag.indexer.loaders.pdf import ManualLoadWarning, PdfLoadReport, load_pdf, read_pdf
from ptxrag.indexer.schema import Manual

pytest.importorskip("typst", reason="typst (the dev extra) typesets the test PDFs")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_manual_pdf import make_pdf, typst_source  # noqa: E402

#: a chapter's start (1.3 is the version section), 24 instruction sections (labels on most pages),
#: the release notes and the notices that close the manual; their ancestors come along
PREFIXES = ("1.3", "2.2.1", "9.7.1", "13.1", "14.1")
LABELS = ("Syntax", "Description", "PTX ISA Notes", "Target ISA Notes", "Examples")
WORD = re.compile(r"[a-z_][\w.]+")


@pytest.fixture(scope="module")
def markdown(shared_dir: Path) -> Manual:
    return load_manual(shared_dir / "corpus" / "ptx-isa-9.1", version="9.1")


@pytest.fixture(scope="module")
def expected(markdown: Manual) -> list[Any]:
    """The Markdown sections the test PDFs hold, in order."""
    keep = set()
    for s in markdown.sections:
        if any(s.number == p or s.number.startswith(p + ".") for p in PREFIXES):
            keep.add(s.number)
            keep.update(s.parents)
    return [s for s in markdown.sections if s.number in keep]


@pytest.fixture(scope="module")
def pdf(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """``pdf(**variant)`` -> the typeset PDF, made once per variant."""
    root = tmp_path_factory.mktemp("pdfs")

    @functools.cache
    def make(**kw: Any) -> Path:
        name = "_".join(f"{k}-{v}" for k, v in sorted(kw.items())).replace(" ", "")
        out = root / f"ptx_isa_9.1_{abs(hash(name))}.pdf"
        kw.setdefault("prefixes", PREFIXES)
        out.write_bytes(make_pdf(shared_dir / "corpus" / "ptx-isa-9.1", version="9.1", **kw))
        return out

    return make


@pytest.fixture(scope="module")
def loaded(pdf):
    """``loaded(**variant)`` -> (pieces, report), read once per variant."""

    @functools.cache
    def read(**kw: Any) -> tuple[list[Any], PdfLoadReport]:
        return read_pdf(pdf(**kw))

    return read


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def _page_texts(path: Path) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() for p in PdfReader(str(path)).pages]


def _check_sections(pieces: list[Any], expected: list[Any], *, titles_casefold: bool = False) -> None:
    assert [p.number for p in pieces] == [s.number for s in expected]
    for p, s in zip(pieces, expected, strict=True):
        if titles_casefold:
            assert p.title.casefold() == s.title.casefold(), p.number
        else:
            assert p.title == s.title, p.number
        want, got = _words(s.text), _words(p.body)
        if not want:
            assert not got, f"{p.number} has no text of its own, got {sorted(got)[:10]}"
            continue
        # recall: the section's words made it; precision: nothing from elsewhere (headers, the next
        # chapter's heading and intro) was glued on
        assert len(want & got) / len(want) >= 0.95, (p.number, sorted(want - got)[:10])
        assert len(want & got) / len(got) >= 0.9, (p.number, sorted(got - want)[:10])


VARIANTS = {
    "release-outline": {},
    "release-no-outline": {"outline": False},
    "legacy-no-outline": {"style": "legacy", "outline": False},
    "legacy-no-outline-no-contents": {"style": "legacy", "outline": False, "toc": False},
}


@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def test_sections_match_the_markdown_they_were_typeset_from(loaded, expected, variant: str) -> None:
    kw = VARIANTS[variant]
    pieces, report = loaded(**kw)
    # upper-case chapter titles (legacy) are restored from the contents only when there is one
    _check_sections(pieces, expected, titles_casefold=kw.get("toc") is False)
    assert report.structure == ("outline" if kw.get("outline", True) else "headings")
    assert report.sections == len(expected)
    assert report.instruction_sections == sum(1 for s in expected if names_in_title(s.title))
    assert report.instruction_sections >= 20
    assert report.warnings == ()
    assert report.headings_not_found == ()
    assert report.total_chars == sum(len(p.body) for p in pieces)
    assert report.largest_section_chars == max(len(p.body) for p in pieces)
    assert (report.contents_entries == len(expected)) == kw.get("toc", True)
    summary = report.summary()
    assert f"{report.sections} sections" in summary and f"{report.total_chars:,} characters" in summary


def test_headings_below_the_outline_s_deepest_level_are_found(loaded, expected) -> None:
    pieces, report = loaded(outline_depth=3)
    _check_sections(pieces, expected)
    assert report.structure == "outline"
    assert report.outline_entries == sum(1 for s in expected if s.depth <= 3)
    assert report.headings_beyond_outline == sum(1 for s in expected if s.depth > 3) > 20
    assert "below its deepest level" in report.summary()


def test_words_hyphenated_at_a_line_end_are_joined(pdf, loaded, markdown) -> None:
    words = {w for s in markdown.sections for w in re.findall(r"[a-z]+", s.text.lower())}
    broken = re.compile(r"([A-Za-z]+)-\n([a-z]+)")

    def breaks(text: str) -> list[str]:
        return [a + b for a, b in broken.findall(text) if (a + b).lower() in words]

    assert breaks("\n".join(_page_texts(pdf())))  # the typesetter did hyphenate some
    pieces, _ = loaded()
    assert breaks("\n".join(p.body for p in pieces)) == []


def test_chapter_heading_and_intro_start_their_own_section(loaded, expected) -> None:
    for kw in ({}, {"outline": False}):
        pieces, _ = loaded(**kw)
        by = {p.number: p for p in pieces}
        chapters = [s for s in expected if s.depth == 1]
        assert len(chapters) >= 4
        for i, s in enumerate(pieces):
            assert not re.search(r"(?m)^Chapter \d+\.?$", s.body), s.number
            nxt = pieces[i + 1] if i + 1 < len(pieces) else None
            if nxt is not None and "." not in nxt.number:
                # the section before a chapter holds none of the chapter's title or intro
                assert nxt.title not in s.body, (s.number, nxt.number)
                intro = next((s2.text for s2 in expected if s2.number == nxt.number), "")
                first = intro.split("\n")[0].strip()
                if first:
                    assert first[:60] not in s.body.replace("\n", " ")
        intro_13 = next(s.text for s in expected if s.number == "13").split(".")[0]
        assert intro_13 and intro_13.replace("\n", " ")[:50] in by["13"].body.replace("\n", " ")


def test_running_headers_go_and_labels_stay(pdf, loaded, expected) -> None:
    path = pdf()
    texts = _page_texts(path)
    # the labels repeat on most pages, like running headers do: a rule by repetition alone strips them
    for label in LABELS:
        share = sum(any(ln.strip() == label for ln in t.splitlines()) for t in texts) / len(texts)
        assert share >= 0.5, (label, share)
    assert all("PTX ISA, Release 9.1" in t for t in texts)
    for kw in ({}, {"style": "legacy", "outline": False}):
        pieces, report = loaded(**kw)
        assert report.running_lines_removed >= len(texts)  # a header and a footer on (nearly) every page
        for p, s in zip(pieces, expected, strict=True):
            for noise in ("PTX ISA, Release 9.1", "Parallel Thread Execution ISA v9.1", "www.nvidia.com"):
                assert noise not in p.body, (p.number, noise)
            for label in LABELS:
                want = sum(1 for ln in s.text.splitlines() if ln.strip() == label)
                got = sum(1 for ln in p.body.splitlines() if ln.strip() == label)
                assert got == want, (p.number, label, got, want)


def _code_blocks(text: str) -> list[list[str]]:
    return [
        [ln.rstrip() for ln in block.split("\n") if ln.strip()]
        for block in re.findall(r"```[^\n]*\n(.*?)\n```", text, flags=re.S)
    ]


def test_syntax_blocks_stay_code_with_their_indentation(loaded, expected) -> None:
    for kw in ({}, {"style": "legacy", "outline": False}):
        pieces, report = loaded(**kw)
        total = 0
        for p, s in zip(pieces, expected, strict=True):
            want = _code_blocks(s.text)
            # a block split by a page break comes back as two blocks; their lines join up
            got = [ln for b in _code_blocks(p.body) for ln in b]
            assert got == [ln for b in want for ln in b], p.number
            assert len(_code_blocks(p.body)) >= len(want)
            total += len(want)
        assert report.code_blocks >= total > 40
    add = {p.number: p for p in loaded()[0]}["9.7.1.1"].body
    assert "\n          .s16, .s32, .s64,\n" in add  # continuation lines keep their alignment


def _drop_for(pdf, keep_chapters_before: str, **kw: Any) -> int:
    """How many trailing pages to drop so that the PDF ends before chapter ``keep_chapters_before``."""
    texts = _page_texts(pdf(**kw))
    start = next(i for i, t in enumerate(texts) if re.search(rf"(?m)^Chapter {keep_chapters_before}\b", t))
    return len(texts) - start


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({}, r"outline entries point past the last page .*from '13\. Release Notes'.*truncated"),
        ({"outline": False}, r"contents list pages up to \d+ but the PDF has \d+ pages.*truncated"),
        ({"outline": False, "toc": False}, r"ends in chapter 9 \(Instruction Set\)"),
    ],
    ids=["outline", "contents", "neither"],
)
def test_a_pdf_with_its_last_pages_cut_is_refused(pdf, kw: dict[str, Any], match: str) -> None:
    n = _drop_for(pdf, "13", **kw)
    cut = pdf(drop_last=n, **kw)
    with pytest.raises(ManualFormatError, match=match) as err:
        read_pdf(cut)
    assert isinstance(err.value, ManualInputError) and exit_code_for(err.value) == 2
    # asked to take it anyway, it loads what is there and says what is missing
    with pytest.warns(ManualLoadWarning, match=match):
        pieces = load_pdf(cut, strict=False)
    assert pieces[-1].number.startswith("9.7.1.")


def test_many_short_chapters_keep_their_chapter_headings(pdf, markdown) -> None:
    # "Chapter N." sits at the same height at the top of most pages here, like a running header would
    short = ("1.3", "3.3", "6.3", "7.2", "12.1", "14.1")
    path = pdf(prefixes=short, outline=False, toc=False)
    texts = _page_texts(path)
    starts = sum(1 for t in texts if re.search(r"(?m)^Chapter \d+\.$", t))
    assert starts / len(texts) >= 0.5
    pieces, report = read_pdf(path)
    keep = {
        s.number
        for s in markdown.sections
        if any(s.number == p or s.number.startswith(p + ".") for p in short)
    }
    keep |= {p for s in markdown.sections if s.number in keep for p in s.parents}
    assert [p.number for p in pieces] == [s.number for s in markdown.sections if s.number in keep]
    assert report.structure == "headings"


def test_cutting_only_the_notices_is_caught_too(pdf) -> None:
    n = _drop_for(pdf, "14", outline=False, toc=False)
    with pytest.raises(ManualFormatError, match=r"ends in chapter 13 \(Release Notes\)"):
        read_pdf(pdf(drop_last=n, outline=False, toc=False))


@pytest.mark.parametrize(
    ("numbered", "match"),
    [("none", "no numbered sections found"), ("chapters", r"could not be recovered: \d+ numbered sections")],
)
def test_an_outline_less_pdf_without_numbered_headings_is_refused(pdf, numbered: str, match: str) -> None:
    path = pdf(outline=False, numbered=numbered)
    assert len(_page_texts(path)) >= 15
    with pytest.raises(ManualFormatError, match=match):
        read_pdf(path)


def test_cli_corpus_add_refuses_a_cut_pdf_with_exit_2(pdf, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path / "home"))
    cut = pdf(drop_last=_drop_for(pdf, "13"))
    res = CliRunner().invoke(app, ["corpus", "add", "ptx-isa", "--version", "9.1", "--from", str(cut)])
    assert res.exit_code == 2, res.output
    assert "truncated" in res.output
    assert not (tmp_path / "home" / "manuals").exists() or not any(
        (tmp_path / "home" / "manuals").rglob("*.json")
    )


def test_load_manual_reads_the_typeset_pdf_whole(pdf, expected) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManualLoadWarning)  # a whole manual loads without a warning
        m = load_manual(pdf(), version="9.1")
    assert m.format == "pdf"
    assert [s.number for s in m.sections] == [s.number for s in expected]
    by = m.by_number()
    assert by["9.7.1.1"].defines[:1] == ("add",)
    assert by["9.7.1"].parents == ("9", "9.7")


def test_generator_source_is_typst_of_every_section(markdown, expected) -> None:
    src = typst_source(markdown, prefixes=PREFIXES, outline=False)
    assert "bookmarked: false" in src
    for s in expected:
        assert f"{s.number}. {s.title}".replace("\\", "\\\\").replace('"', '\\"') in src


def _first_table(text: str) -> list[list[str]]:
    """Rows of cells of the first Markdown table in ``text``."""
    rows: list[list[str]] = []
    for ln in text.splitlines():
        if ln.startswith("|"):
            if not re.fullmatch(r"[|\s:-]+", ln):
                rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif rows:
            break
    return rows


def test_tables_come_back_as_rows_of_cells(loaded, expected) -> None:
    pieces, _ = loaded()
    checked = 0
    for p, s in zip(pieces, expected, strict=True):
        want = _first_table(s.text)
        if not want:
            continue
        got = _first_table(p.body)
        assert got, f"{p.number}: its table came back as running text"
        width = Counter(len(r) for r in want).most_common(1)[0][0]
        assert Counter(len(r) for r in got).most_common(1)[0][0] == width, p.number
        firsts = {r[0] for r in got}
        hits = sum(1 for r in want if r[0] in firsts)
        assert hits / len(want) >= 0.9, (p.number, hits, len(want))
        checked += 1
    assert checked >= 1


def test_the_9_0_manual_typeset_without_outline_loads_whole(shared_dir: Path, tmp_path: Path) -> None:
    md = shared_dir / "corpus" / "ptx-isa-9.0"
    prefixes = ("1.3", "9.7.2", "14.1")
    path = tmp_path / "ptx_isa_9.0.pdf"
    path.write_bytes(make_pdf(md, version="9.0", prefixes=prefixes, outline=False))
    manual = load_manual(md, version="9.0")
    keep = {
        s.number
        for s in manual.sections
        if any(s.number == p or s.number.startswith(p + ".") for p in prefixes)
    }
    keep |= {p for s in manual.sections if s.number in keep for p in s.parents}
    pieces, report = read_pdf(path)
    _check_sections(pieces, [s for s in manual.sections if s.number in keep])
    assert report.structure == "headings" and report.warnings == ()


def test_long_titles_wrapped_over_two_lines_come_back_whole(pdf, markdown) -> None:
    # titles that wrap after "K=64/" and before "/ mbarrier.try_wait" (a slash in a word, and one alone)
    long = ("9.7.16.10.7.2.2", "9.7.13.15.16", "14.1")
    path = pdf(prefixes=long, style="legacy", outline=False, toc=False)
    by = markdown.by_number()
    lines = {ln.strip() for t in _page_texts(path) for ln in t.splitlines()}
    wrapped = [n for n in long[:2] if f"{n} {by[n].title}" not in lines]
    assert wrapped == list(long[:2])  # neither title fits on one line
    pieces, _ = read_pdf(path)
    got = {p.number: p.title for p in pieces}
    assert [got[n] for n in long[:2]] == [by[n].title for n in long[:2]]
