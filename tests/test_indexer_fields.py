"""Section fields indexed as BM25 of their own (``fields.py``): what each holds, that they are indexed
and searched, and that fusion uses them only with a weight."""

from __future__ import annotations

import shutil
from pathlib import Path

from ptxrag.indexer import FusionWeights, lexical
from ptxrag.indexer.fields import description, queries
from ptxrag.indexer.fusion import Candidate, fuse
from ptxrag.indexer.schema import Section
from ptxrag.indexer.text import tokenize

MATCH = Section(
    number="9.7.13.10",
    title="Parallel Synchronization and Communication Instructions: match.sync",
    parents=("9", "9.7", "9.7.13"),
    defines=("match.sync",),
    text=(
        "match.sync\n\nBroadcast and compare a value across threads in warp.\n\nSyntax\n\n```\n"
        "match.any.sync.b32 d, a, membermask;\n```\n\nDescription\n\nFind the threads of the warp that hold "
        "the same value of a.\n\nThe mask d has one bit per lane.\n\nExamples\n\n```\nmatch.any.sync.b32 "
        "d, r1, 0xffffffff;\n```\n\nPTX ISA Notes\n\nIntroduced in PTX ISA version 6.0. Register value "
        "lane warp thread warp lane value register warp lane.\n"
    ),
)
SHFL = Section(
    number="9.7.9.6",
    title="Data Movement and Conversion Instructions: shfl.sync",
    parents=("9", "9.7", "9.7.9"),
    defines=("shfl.sync",),
    text=(
        "shfl.sync\n\nRegister data shuffle within threads of a warp.\n\nDescription\n\nExchange "
        "register data between threads of a warp.\n"
    ),
)
CONCEPT = Section(
    number="8.5",
    title="Scope",
    parents=("8",),
    text="Each strong operation has a scope, the set of threads it may interact with.\n\nExamples\n\nMore text.\n",
)


def test_description_is_purpose_and_description_prose_only() -> None:
    d = description(MATCH)
    assert d.startswith("Broadcast and compare") and "same value of a" in d and "one bit per lane" in d
    assert "match.any.sync.b32" not in d  # no syntax or example code
    assert "Introduced in PTX ISA" not in d  # stops at the label after the Description
    assert (
        description(CONCEPT) == "Each strong operation has a scope, the set of threads it may interact with."
    )


def test_queries_are_templated_masked_pseudo_queries() -> None:
    q = queries(MATCH).splitlines()
    assert "which instruction does broadcast and compare a value across threads in warp" in q
    assert "how to broadcast and compare a value across threads in warp" in q
    assert not any("match" in line for line in q)  # the defined name is masked out, not asked with
    # a concept section keeps its prose as it is
    assert queries(CONCEPT) == "Each strong operation has a scope, the set of threads it may interact with"


def test_field_indexes_are_built_searched_and_optional(tmp_path: Path) -> None:
    lexical.build(tmp_path, [MATCH, SHFL, CONCEPT])
    idx = lexical.LexicalIndex(tmp_path)
    toks = tokenize("threads of the warp that hold the same value")
    desc = idx.field_scores("description", toks)
    assert desc is not None and int(desc.argmax()) == 0
    asked = idx.field_scores("queries", tokenize("which instruction does exchange register data"))
    assert asked is not None and int(asked.argmax()) == 1
    # words of MATCH's Notes only: the whole text scores them, the description field does not
    notes = tokenize("introduced in version")
    field = idx.field_scores("description", notes)
    assert field is not None and field[0] == 0 and idx.section_scores(notes)[0] > 0
    shutil.rmtree(tmp_path / "bm25-descriptions")
    assert lexical.LexicalIndex(tmp_path).field_scores("description", toks) is None  # older index


def test_fusion_uses_a_field_only_with_a_weight() -> None:
    a = Candidate(key=("c", "1"), lexical=2.0)
    b = Candidate(key=("c", "2"), lexical=1.0, description=5.0)
    assert fuse([a, b], {}, FusionWeights())[0][0] is a
    assert fuse([a, b], {}, FusionWeights(description=3.0))[0][0] is b
