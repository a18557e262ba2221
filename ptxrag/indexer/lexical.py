"""BM25 (bm25s) over whole sections and over section titles, with a tokenizer that keeps PTX names whole.

Whole sections rank better lexically than chunks (a name and its description are often paragraphs
apart); titles get their own index so that a query naming a concept ("Swizzling Modes") finds the section
about it rather than the many that merely use the words."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .chunking import breadcrumb
from .schema import Section
from .text import tokenize

_SECTIONS = "bm25-sections"
_TITLES = "bm25-titles"


def section_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    head = breadcrumb(section, by_number, 3)
    return tokenize(f"{head}\n{' '.join(section.defines)}\n{section.text}")


def title_document(section: Section, by_number: Mapping[str, Section]) -> list[str]:
    return tokenize(f"{breadcrumb(section, by_number, 2)}\n{' '.join(section.defines)}")


def _bm25() -> object:
    import bm25s

    return bm25s.BM25(k1=1.2, b=0.75)


def build(folder: Path, sections: list[Section]) -> None:
    """Index ``sections`` (document order = row order) into ``folder``."""
    by_number = {s.number: s for s in sections}
    for name, make in ((_SECTIONS, section_document), (_TITLES, title_document)):
        docs = [make(s, by_number) or ["_empty_"] for s in sections]
        index = _bm25()
        index.index(docs, show_progress=False)  # type: ignore[attr-defined]
        index.save(str(folder / name), show_progress=False)  # type: ignore[attr-defined]


class LexicalIndex:
    """The two BM25 indexes of one collection, loaded."""

    def __init__(self, folder: Path) -> None:
        import bm25s

        self._sections = bm25s.BM25.load(str(folder / _SECTIONS), show_progress=False, verbosity=0)
        self._titles = bm25s.BM25.load(str(folder / _TITLES), show_progress=False, verbosity=0)

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
