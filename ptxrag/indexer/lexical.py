"""BM25 (bm25s) over whole sections and over section titles, with a tokenizer that keeps PTX names whole.

Whole sections rank better lexically than chunks (a name and its description are often paragraphs
apart); titles get their own index so that a query naming a concept ("Swizzling Modes") finds the section
about it rather than the many that merely use the words."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import fields
from .chunking import breadcrumb, short_title, summary
from .schema import Section
from .text import tokenize

_SECTIONS = "bm25-sections"
_TITLES = "bm25-titles"
_SUMMARIES = "bm25-summaries"
_DESCRIPTIONS = "bm25-descriptions"
_QUERIES = "bm25-queries"


#: CUDA programming-guide words -> the manual's own vocabulary. Agents (and people) ask in CUDA terms
#: ("thread block", "TMA", "DSMEM"); the manual says "CTA", "cp.async.bulk.tensor", "shared::cluster".
#: Standard terminology pairs only, applied to the query's lexical tokens (the dense signal sees the
#: query as written).
GLOSSARY: tuple[tuple[str, str], ...] = (
    (r"\bthread ?blocks?\b|(?<!basic )\bblocks?\b(?![- ]?scal)", "cta"),
    (r"\btma\b", "cp.async.bulk.tensor tensor"),
    (r"\btensor (?:map|descriptor)s?\b", "tensormap tensor-map"),
    (r"\bdsmem\b|\bdistributed shared memory\b", "shared::cluster"),
    (r"\bpdl\b|\bprogrammatic dependent launch\b", "griddepcontrol"),
    (r"\btensor cores?\b", "mma"),
    (r"\bwarpgroups?\b", "wgmma warpgroup"),
    (r"\bblackwell\b", "tcgen05 sm_100a"),
    (r"\bhopper\b", "sm_90a"),
    (r"\bfp8\b", "e4m3 e5m2"),
    (r"\bfp4\b", "e2m1"),
    (r"\bfp6\b", "e2m3 e3m2"),
    (r"\bbfloat16\b", "bf16"),
    (r"\bhalf(?:-precision)?\b", "f16"),
    (r"\bdouble(?:-precision)?\b", "f64"),
    (r"\bsingle-precision\b", "f32"),
    (r"\bshuffle\b", "shfl"),
    (r"\bballot\b", "vote.ballot"),
    (r"\bpopcount\b", "popc"),
    (r"\blane (?:id|number|index)\b", "%laneid"),
    (r"\bshared memory barriers?\b|\bbarrier objects?\b", "mbarrier"),
)
_GLOSSARY = tuple((re.compile(p, re.IGNORECASE), add) for p, add in GLOSSARY)


def query_tokens(query: str) -> list[str]:
    """The query's BM25 tokens, with the manual's words for the CUDA terms it uses (``GLOSSARY``)."""
    extra = [add for pat, add in _GLOSSARY if pat.search(query)]
    return tokenize(f"{query} {' '.join(extra)}" if extra else query)


def section_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    head = breadcrumb(section, by_number, 3)
    return tokenize(f"{head}\n{' '.join(section.defines)}\n{section.text}")


def title_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    return tokenize(f"{breadcrumb(section, by_number, 2)}\n{' '.join(section.defines)}")


def summary_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    """Title, defined names and the section's summary (``chunking.summary``): what it is about."""
    return tokenize(f"{breadcrumb(section, by_number, 2)}\n{' '.join(section.defines)}\n{summary(section)}")


def description_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    """Short title, defined names and what the section does (``fields.description``)."""
    return tokenize(
        f"{short_title(section.title)}\n{' '.join(section.defines)}\n{fields.description(section)}"
    )


def queries_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    """The section's pseudo-queries (``fields.queries``), doc2query-style."""
    return tokenize(fields.queries(section))


def _bm25() -> object:
    import bm25s

    return bm25s.BM25(k1=1.2, b=0.75)


def build(folder: Path, sections: list[Section]) -> None:
    """Index ``sections`` (document order = row order) into ``folder``."""
    by_number = {s.number: s for s in sections}
    for name, make in (
        (_SECTIONS, section_document),
        (_TITLES, title_document),
        (_SUMMARIES, summary_document),
        (_DESCRIPTIONS, description_document),
        (_QUERIES, queries_document),
    ):
        docs = [make(s, by_number) or ["_empty_"] for s in sections]
        index = _bm25()
        index.index(docs, show_progress=False)  # type: ignore[attr-defined]
        index.save(str(folder / name), show_progress=False)  # type: ignore[attr-defined]


class LexicalIndex:
    """The BM25 indexes of one collection, loaded."""

    def __init__(self, folder: Path) -> None:
        import bm25s

        self._sections = bm25s.BM25.load(str(folder / _SECTIONS), show_progress=False, verbosity=0)
        self._titles = bm25s.BM25.load(str(folder / _TITLES), show_progress=False, verbosity=0)
        # indexes built before a field existed lack it: that signal is then absent
        self._summaries, self._descriptions, self._queries = (
            bm25s.BM25.load(str(folder / name), show_progress=False, verbosity=0)
            if (folder / name).is_dir()
            else None
            for name in (_SUMMARIES, _DESCRIPTIONS, _QUERIES)
        )

    def _scores(self, index: object, tokens: list[str]) -> np.ndarray:
        vocab = index.vocab_dict  # type: ignore[attr-defined]
        known = [t for t in tokens if t in vocab]
        n = index.scores["num_docs"]  # type: ignore[attr-defined]
        if not known:
            return np.zeros(n, dtype=np.float32)
        return np.asarray(index.get_scores(known), dtype=np.float32)  # type: ignore[attr-defined]

    def section_scores(self, tokens: list[str]) -> np.ndarray:
        return self._scores(self._sections, tokens)

    def title_scores(self, tokens: list[str]) -> np.ndarray:
        return self._scores(self._titles, tokens)

    def summary_scores(self, tokens: list[str]) -> np.ndarray | None:
        return None if self._summaries is None else self._scores(self._summaries, tokens)

    def field_scores(self, field: str, tokens: list[str]) -> np.ndarray | None:
        """BM25 over one section field (``description`` or ``queries``); None when not indexed."""
        index = {"description": self._descriptions, "queries": self._queries}[field]
        return None if index is None else self._scores(index, tokens)
