"""Manual loaders on real data (both Markdown layouts in ../shared/corpus) and on small HTML and PDF manuals
built in the official structure; text cleaning, instruction names, chunking, diff. No embedding model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptxrag.indexer import ManualFormatError, diff_manuals, load_manual
from ptxrag.indexer.chunking import ChunkingParams, blocks, chunk_sections
from ptxrag.indexer.instructions import match_sections, names_in_query, names_in_title
from ptxrag.indexer.loaders import detect_format
from ptxrag.indexer.text import clean_markdown, tokenize

FIXTURES = Path(__file__).parent / "fixtures" / "manuals"
sys.path.insert(0, str(FIXTURES))
from pdf_fixture import HEADER, build_pdf  # noqa: E402

NOISE = ("Copy to clipboard", "Permalink to this", "\uf0c1", "](http")


@pytest.fixture(scope="module")
def manual_91(shared_dir: Path):
    return load_manual(shared_dir / "corpus" / "ptx-isa-9.1", version="9.1")


@pytest.fixture(scope="module")
def manual_90(shared_dir: Path):
    return load_manual(
        shared_dir / "corpus" / "ptx-isa-9.0",
        version="9.0",
        base_url="https://docs.nvidia.com/cuda/archive/13.0.2/parallel-thread-execution/index.html",
    )


# --- Markdown: one file per section (9.1) --------------------------------------------------------------


def test_markdown_one_file_per_section(manual_91) -> None:
    by = manual_91.by_number()
    assert len(manual_91.sections) > 650
    assert manual_91.duplicates_dropped == 0
    s = by["9.7.13.15.16"]
    assert s.title == (
        "Parallel Synchronization and Communication Instructions: mbarrier.test_wait / mbarrier.try_wait"
    )
    assert s.parents == ("9", "9.7", "9.7.13", "9.7.13.15")
    assert s.url == (
        "https://docs.nvidia.com/cuda/parallel-thread-execution/"
        "#parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait"
    )
    assert {"mbarrier.test_wait", "mbarrier.try_wait", "mbarrier.try_wait.parity"} <= set(s.defines)
    assert "suspendTimeHint" in s.text
    # the syntax block survives whole, fences balanced
    assert "```\nmbarrier.test_wait{.sem.scope}{.shared{::cta}}.b64" in s.text
    assert s.text.count("```") % 2 == 0
    assert "cp.async.bulk" in s.mentions


def test_markdown_text_is_clean(manual_91) -> None:
    dirty = [(s.number, n) for s in manual_91.sections for n in NOISE if n in s.text]
    assert dirty == []
    assert not any("\\_" in s.text for s in manual_91.sections[:200])


def test_markdown_title_wrapped_over_two_lines_is_one_section(manual_91) -> None:
    # "# 9.7.9.14. Data Movement ... Instructions:\nmultimem.ld_reduce, ..." then the linked heading
    s = manual_91.by_number()["9.7.9.14"]
    assert {"multimem.ld_reduce", "multimem.st", "multimem.red"} <= set(s.defines)
    assert len(s.text) > 1000


def test_markdown_architectures(manual_91) -> None:
    archs = manual_91.architectures()
    assert {"sm_90a", "sm_100a", "sm_120a"} <= set(archs)
    assert archs.index("sm_90a") < archs.index("sm_100a")  # numeric order, not text order


# --- Markdown: flat folder whose parent files repeat their children (9.0) ------------------------------


def test_markdown_parents_repeating_children_are_indexed_once(manual_90, manual_91) -> None:
    by = manual_90.by_number()
    numbers = [s.number for s in manual_90.sections]
    assert len(numbers) == len(set(numbers)) > 650
    assert manual_90.duplicates_dropped > 1000
    parent = by["9.7.13.15"]
    child = by["9.7.13.15.16"]
    # the parent keeps only its own introduction, not its children's text
    assert "mbarrier.test_wait is a non-blocking instruction" in child.text
    assert "mbarrier.test_wait is a non-blocking instruction" not in parent.text
    assert len(parent.text) < 3000
    # whole manual: about the size of 9.1, not the 7 MB of repeated text on disk
    total_90 = sum(len(s.text) for s in manual_90.sections)
    total_91 = sum(len(s.text) for s in manual_91.sections)
    assert 0.9 < total_90 / total_91 < 1.1
    # relative anchors made absolute with the base URL
    assert child.url is not None and child.url.startswith("https://docs.nvidia.com/cuda/archive/13.0.2/")


def test_markdown_duplicate_parent_in_a_tiny_folder(tmp_path: Path) -> None:
    (tmp_path / "2-programming-model.md").write_text(
        "# 2. Programming Model\n\nIntro of chapter two.\n\n"
        '2.1. [A Coprocessor](#coprocessor)[](#coprocessor "Permalink to this headline")\n'
        "------------------------------------------------\n\nChild text, repeated in the parent file.\n",
        encoding="utf-8",
    )
    (tmp_path / "2-1-a-coprocessor.md").write_text(
        "## 2.1. A Coprocessor\n\nChild text, repeated in the parent file.\n", encoding="utf-8"
    )
    (tmp_path / "2-2-threads.md").write_text("## 2.2. Threads\n\nThread text.\n", encoding="utf-8")
    m = load_manual(tmp_path, version="9.0", base_url="https://example.org/ptx/index.html")
    assert [s.number for s in m.sections] == ["2", "2.1", "2.2"]
    by = m.by_number()
    assert by["2"].text == "Intro of chapter two."
    assert by["2.1"].text == "Child text, repeated in the parent file."
    assert by["2.1"].anchor == "coprocessor"
    assert by["2.1"].url == "https://example.org/ptx/index.html#coprocessor"
    assert m.duplicates_dropped == 1


# --- HTML (official single page) ---------------------------------------------------------------------


def test_html_official_structure() -> None:
    m = load_manual(
        FIXTURES / "ptx-isa-mini.html",
        version="9.1",
        base_url="https://docs.nvidia.com/cuda/parallel-thread-execution/index.html",
    )
    assert m.format == "html"
    by = m.by_number()
    assert [s.number for s in m.sections] == [
        "1",
        "1.3",
        "9",
        "9.7",
        "9.7.9.27.1.2",
        "9.7.13",
        "9.7.13.15",
        "9.7.13.15.16",
    ]
    s = by["9.7.13.15.16"]
    assert s.title.endswith("Instructions: mbarrier.test_wait / mbarrier.try_wait")
    assert s.anchor == "parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait"
    assert s.url == f"https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#{s.anchor}"
    assert s.parents == ("9", "9.7", "9.7.13", "9.7.13.15")
    assert "mbarrier.try_wait.parity" in s.defines
    # code block whole (operand lines included), table as Markdown, figure caption without permalink
    assert "```\nmbarrier.test_wait{.sem.scope}" in s.text and "{, suspendTimeHint};" in s.text
    assert "| Qualifier | Meaning |" in s.text and "| .relaxed | no ordering |" in s.text
    assert "Figure 1 Phases of an mbarrier object" in s.text
    for noise in (*NOISE, "toctree", "Navigation", "Copyright"):
        assert all(noise not in x.text for x in m.sections), noise
    # the children's text stays in the children
    assert "suspendTimeHint" not in by["9.7.13.15"].text
    assert "sm_100a" in m.architectures()


def test_html_without_numbered_sections_is_a_clear_error(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><body><h1>Welcome</h1><p>No manual here.</p></body></html>", encoding="utf-8")
    with pytest.raises(ManualFormatError, match="none is numbered"):
        load_manual(page, version="9.1")
    bare = tmp_path / "bare.html"
    bare.write_text("<html><body><p>text only</p></body></html>", encoding="utf-8")
    with pytest.raises(ManualFormatError, match="without any headings"):
        load_manual(bare, version="9.1")


# --- PDF ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("outline", [True, False], ids=["outline", "heading-patterns"])
def test_pdf_sections(tmp_path: Path, outline: bool) -> None:
    pdf = build_pdf(tmp_path / "ptx_isa_9.1.pdf", outline=outline)
    m = load_manual(pdf, version="9.1")
    assert m.format == "pdf"
    assert [s.number for s in m.sections] == [
        "1",
        "1.1",
        "1.2",
        "1.3",
        "2",
        "2.1",
        "2.2",
        "2.2.1",
        "2.2.2",
        "3",
        "4",
    ]
    by = m.by_number()
    assert by["1.3"].title == "PTX ISA Version 9.1"
    # numbered list items inside a section are text, not headings
    assert "1. CTAs in a cluster are guaranteed to be co-scheduled." in by["2.2.2"].text
    # running header and contents page are gone
    assert all(HEADER not in s.text and "...." not in s.text for s in m.sections)
    assert by["3"].defines == ("mbarrier.try_wait",)
    assert "suspendTimeHint" in by["3"].text
    assert by["2.2.2"].parents == ("2", "2.2")


def test_truncated_pdf_is_a_clear_error(tmp_path: Path) -> None:
    pdf = build_pdf(tmp_path / "full.pdf")
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(pdf.read_bytes()[: pdf.stat().st_size // 3])
    with pytest.raises(ManualFormatError, match="cut.pdf"):
        load_manual(cut, version="9.1")


def test_empty_and_missing_inputs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ManualFormatError, match="no Markdown"):
        load_manual(tmp_path, version="9.1")
    (tmp_path / "notes.md").write_text("# Notes\n\nnothing numbered\n", encoding="utf-8")
    with pytest.raises(ManualFormatError, match="no numbered section headings"):
        load_manual(tmp_path, version="9.1")
    with pytest.raises(ManualFormatError, match="no such file"):
        load_manual(tmp_path / "absent", version="9.1")
    other = tmp_path / "data.bin"
    other.write_bytes(b"\x00\x01binary")
    with pytest.raises(ManualFormatError, match="not a folder of Markdown"):
        detect_format(other)


# --- text, names, chunks -------------------------------------------------------------------------------


def test_clean_markdown_keeps_code_and_drops_noise() -> None:
    raw = (
        'See [Figure 4](https://x/#f4)[\uf0c1](https://x/#f4 "Permalink to this image") and `mbarrier.init`.\n\n'
        "![img](./ptx_files/a.png)\n\n```\n[addr] `kept` \\_ as is\n```\n\nCopy to clipboard\n\n"
        "test\\_wait | 64 \\* .num\n"
    )
    out = clean_markdown(raw)
    assert (
        out == "See Figure 4 and mbarrier.init.\n\n```\n[addr] `kept` \\_ as is\n```\n\ntest_wait | 64 * .num"
    )


def test_tokenizer_keeps_ptx_names_and_their_prefixes() -> None:
    toks = tokenize("mbarrier.try_wait.parity on shared::cluster, PTX ISA version 8.0, %tid and .target")
    for t in ("mbarrier.try_wait.parity", "mbarrier.try_wait", "mbarrier", "try_wait", "parity"):
        assert t in toks
    assert "shared::cluster" in toks and "cluster" in toks
    assert "8.0" in toks and "%tid" in toks and ".target" in toks
    assert "on" not in toks and "and" not in toks


def test_names_in_titles_and_queries() -> None:
    assert names_in_title("Parallel Synchronization and Communication Instructions: `bar`, `barrier`") == (
        "bar",
        "barrier",
    )
    assert names_in_title("Data Movement and Conversion Instructions: shfl (deprecated)") == ("shfl",)
    assert names_in_title("Special Registers: %clock, %clock_hi") == ("%clock", "%clock_hi")
    assert names_in_title("Matrix Fragments for wgmma.mma_async.m64nNk16") == ()
    assert names_in_title("Data Movement and Conversion Instructions: Asynchronous copy") == ()
    vocab = {"ldmatrix", "redux.sync", "add", "mbarrier", "mbarrier.init"}
    q = {n.name: n for n in names_in_query("redux.sync add min max", vocab)}
    assert set(q) == {"redux.sync"}  # 'add' is an everyday word unless quoted or dotted
    q = {n.name: n for n in names_in_query("ptxas error : Instruction 'add' and ldmatrix", vocab)}
    assert set(q) == {"add", "ldmatrix"} and q["add"].weight == 2.0 and q["ldmatrix"].bare
    q = {
        n.name: n
        for n in names_in_query("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx", vocab)
    }
    assert "cp.async.bulk.tensor.2d.shared.global.mbarrier" in q


def test_instruction_matching_exact_variant_and_family() -> None:
    defines = {
        "9.7.13.15": ("mbarrier",),
        "9.7.13.15.9": ("mbarrier.init",),
        "9.7.13.15.16": ("mbarrier.test_wait", "mbarrier.try_wait"),
        "9.7.13.15.13": ("mbarrier.arrive",),
        "9.7.14.5.15": ("ldmatrix",),
    }
    vocab = {n for names in defines.values() for n in names}

    def bonus(q: str) -> dict[str, float]:
        return match_sections(names_in_query(q, vocab), defines)

    assert bonus("mbarrier.init") == {"9.7.13.15.9": 2.0}
    assert bonus("mbarrier.try_wait.parity") == {"9.7.13.15.16": pytest.approx(2.7)}  # longest defined prefix
    assert bonus("mbarrier.arrive.expect_tx") == {"9.7.13.15.13": pytest.approx(2.7)}
    assert bonus("ldmatrix") == {"9.7.14.5.15": 1.0}
    assert bonus("phase of an mbarrier object") == {}  # a family word, not the overview section
    assert bonus("wgmma layouts") == {}


def test_chunks_carry_breadcrumbs_and_keep_code_whole(manual_91) -> None:
    params = ChunkingParams()
    secs = [s for s in manual_91.sections if s.number.startswith("9.7.13.15")]
    every = chunk_sections(manual_91.sections, source="ptx-isa", version="9.1", params=params)
    chunks = [c for c in every if c.section_number.startswith("9.7.13.15")]
    by_section: dict[str, list] = {}
    for c in chunks:
        by_section.setdefault(c.section_number, []).append(c)
    assert set(by_section) == {s.number for s in secs}  # every section, even heading-only ones
    wait = by_section["9.7.13.15.16"]
    assert len(wait) > 3
    for c in wait:
        assert c.text.startswith(
            "9.7.13 Parallel Synchronization and Communication Instructions > 9.7.13.15 mbarrier"
        )
        assert c.text.count("```") % 2 == 0  # a code block is never cut
    assert wait[0].breadcrumb.startswith("9 Instruction Set > 9.7 Instructions > ")
    assert len({c.chunk_id for c in every}) == len(every)
    prose = [c for c in every if "```" not in c.text and "|" not in c.text]
    assert max(len(c.text) - len(c.text.split("\n\n", 1)[0]) for c in prose) < 2 * params.max_chars
    for b in blocks(secs[0].text):
        assert b.startswith("```") == b.endswith("```")


def test_diff_9_0_to_9_1(manual_90, manual_91) -> None:
    d = diff_manuals(manual_90, manual_91)
    assert {"multimem.cp.async.bulk", "multimem.cp.reduce.async.bulk"} <= set(d.instructions_added)
    assert "tensormap.replace" not in d.instructions_added  # present in both, only renumbered
    changed = {c.number: c for c in d.sections_changed}
    assert changed["1.3"].kind == "changed" and "9.0" in changed["1.3"].detail
    assert changed["9.7.9.27.1.2"].kind == "renumbered" and "9.7.9.25.5.2" in changed["9.7.9.27.1.2"].detail
    assert "9.7.9.25.5.2" not in {c.number for c in d.sections_removed}
    same = diff_manuals(manual_91, manual_91)
    assert not (same.sections_added or same.sections_removed or same.sections_changed)
