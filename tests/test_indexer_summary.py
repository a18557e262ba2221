"""Section summaries, the CUDA-term glossary of queries, the instruction-asking prior and the fusion of
the summary signal."""

from __future__ import annotations

from ptxrag.indexer.chunking import ChunkingParams, chunk_sections, summary
from ptxrag.indexer.fusion import Candidate, FusionWeights, fuse
from ptxrag.indexer.lexical import query_tokens
from ptxrag.indexer.retriever import asks_instruction
from ptxrag.indexer.schema import Section
from ptxrag.indexer.text import tokenize

POPC = Section(
    number="9.7.1.14",
    title="Integer Arithmetic Instructions: popc",
    parents=("9", "9.7", "9.7.1"),
    defines=("popc", "popc.type"),
    text=(
        "popc\n\nPopulation count.\n\nSyntax\n\n```\npopc.type  d, a;\n\n.type = { .b32, .b64 };\n```\n\n"
        "Description\n\nCount the number of one bits in a and place the resulting *population count* in "
        "32-bit destination register d.\n\nPTX ISA Notes\n\nIntroduced in PTX ISA version 2.0.\n\n"
        "Examples\n\n```\npopc.b32  d, a;\n```\n" + "More text about operands. " * 60
    ),
)


def test_summary_is_the_purpose_and_description_without_code_or_labels() -> None:
    s = summary(POPC)
    assert s.startswith("Population count. Count the number of one bits")
    assert "```" not in s and "Syntax" not in s and ".b64" not in s
    assert len(summary(POPC, 120)) <= 120


def test_summary_chunk_is_added_only_when_it_says_less_than_the_section() -> None:
    chunks = chunk_sections([POPC], source="ptx-isa", version="9.1", params=ChunkingParams())
    assert chunks[-1].text.endswith(summary(POPC)) and chunks[-1].ordinal == len(chunks) - 1
    off = chunk_sections([POPC], source="ptx-isa", version="9.1", params=ChunkingParams(summary_chunk=False))
    assert len(off) == len(chunks) - 1
    tiny = POPC.model_copy(update={"text": "Population count."})
    assert len(chunk_sections([tiny], source="ptx-isa", version="9.1", params=ChunkingParams())) == 1


def test_glossary_adds_the_manuals_words_for_cuda_terms() -> None:
    assert "cta" in query_tokens("synchronise every thread block of the cluster")
    assert "cta" not in query_tokens("block scaling of fp8 inputs")  # not a thread block
    assert "cta" not in query_tokens("execution frequency of a basic block")
    assert {"e4m3", "e5m2"} <= set(query_tokens("convert to fp8"))
    assert query_tokens("mbarrier.try_wait") == tokenize("mbarrier.try_wait")


def test_asks_instruction_prior_demotes_sections_that_define_nothing() -> None:
    assert asks_instruction("which instruction frees tensor memory columns?")
    assert not asks_instruction("what happens when a register is wider than the instruction type")
    concept = Candidate(key=("k", "9.7.16.1.2"), lexical=3.0, title=3.0, dense=0.9)
    ref = Candidate(key=("k", "9.7.16.7.1"), lexical=2.0, title=2.0, dense=0.8, defines=True)
    w = FusionWeights(asks_instruction_factor=0.5)
    assert fuse([concept, ref], {}, w)[0][0] is concept
    assert fuse([concept, ref], {}, w, asks_instruction=True)[0][0] is ref


def test_summary_signal_counts_only_with_weight() -> None:
    a = Candidate(key=("k", "a"), lexical=2.0, summary=0.1)
    b = Candidate(key=("k", "b"), lexical=1.0, summary=5.0)
    assert fuse([a, b], {}, FusionWeights(title=0, dense=0))[0][0] is a
    assert fuse([a, b], {}, FusionWeights(title=0, dense=0, summary=3.0))[0][0] is b


def test_pack_quota_keeps_manual_sections_in_the_top_k() -> None:
    from ptxrag.indexer.retriever import _quota

    ranked = [
        (Candidate(key=("contracts@bundled", "c1")), 0.9),
        (Candidate(key=("contracts@bundled", "c2")), 0.8),
        (Candidate(key=("templates@bundled", "t1")), 0.7),
        (Candidate(key=("ptx-isa@9.1", "9.7.1")), 0.6),
        (Candidate(key=("ptx-isa@9.1", "9.7.2")), 0.5),
        (Candidate(key=("ptx-isa@9.1", "9.7.3")), 0.4),
    ]
    got = [c.key[1] for c, _ in _quota(ranked, 5, 2)]
    assert got == ["c1", "c2", "9.7.1", "9.7.2", "9.7.3"]
    assert [c.key[1] for c, _ in _quota(ranked, 5, 5)] == ["c1", "c2", "t1", "9.7.1", "9.7.2"]
    # fewer manual sections than slots: the pack fills the rest, best first
    assert [c.key[1] for c, _ in _quota(ranked[:4], 4, 1)] == ["c1", "9.7.1", "c2", "t1"]


def test_the_instruction_descriptor_is_a_concept_not_a_request_for_an_instruction() -> None:
    assert not asks_instruction("instruction descriptor fields for the tcgen05 matrix multiply")
    assert asks_instruction("error   : Arguments mismatch for instruction 'fns'")


def test_dense_query_drops_the_question_around_what_an_instruction_does() -> None:
    from ptxrag.indexer.retriever import dense_query

    assert dense_query("which instruction frees tensor memory columns?") == "frees tensor memory columns"
    assert dense_query("Which PTX instruction does a dot product of pairs?") == "a dot product of pairs"
    assert dense_query("mbarrier.try_wait.parity") == "mbarrier.try_wait.parity"
    assert dense_query("which instruction?") == "which instruction"  # nothing after the question words


def test_compiler_locations_are_taken_out_of_pasted_messages() -> None:
    from ptxrag.indexer.text import strip_compiler_locations as strip

    ptxas = "ptxas /tmp/a b/k.ptx, line 17; error   : Unknown modifier '.x'"  # a space in the path: kept
    assert strip("ptxas /tmp/ab/k.ptx, line 17; error   : Unknown modifier '.x'") == (
        "ptxas error   : Unknown modifier '.x'"
    )
    assert strip(ptxas) == ptxas
    two = "ptxas k.ptx, line 3; fatal   : Parsing error near 'd': syntax error\nptxas k.ptx, line 4; error   : X"
    assert strip(two) == "ptxas fatal   : Parsing error near 'd': syntax error\nptxas error   : X"
    assert (
        strip('candidate.cu(12): error: identifier "x" is undefined') == 'error: identifier "x" is undefined'
    )
    assert strip("/tmp/k.cu:12:5: error: expected ';'") == "error: expected ';'"
    # questions that merely contain such words are left alone
    for q in ("what does ld.global.nc do, line 3; maybe", "why is k.cu(12) slow", "ptxas error   : X"):
        assert strip(q) == q
