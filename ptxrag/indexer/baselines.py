"""Retrievers to measure the real one against (``ptxrag eval-retrieval --ablation``).

- ``bm25-chunks``: the strong baseline of the retrieval literature: plain BM25 (bm25s, English stopwords,
  no PTX-aware tokenizer) over fixed-size windows of 120 words (stride 60) of every section's title and
  text; a section scores its best window.
- ``bm25``, ``dense``, ``dense-tower``, ``dense-memory``, ``fusion``, ``fusion-tuned-base``, ``fusion-tuned``,
  ``default``: the real retriever with some parts switched off through its fusion weights (``ABLATIONS``):
  BM25 over whole sections alone; dense (best chunk, base model) alone; dense alone with the query
  embedded by the learned query tower (``tower.py``); the same with the query memory (``memory.py``: a
  section also scores its nearest remembered training query); the four signals (section BM25, title BM25, summary BM25, dense of
  the base model) in plain equal-weight reciprocal-rank fusion without the instruction-name bonus, stub
  demotion, glossary, instruction prior or pack quota; the hand-tuned fusion with every rule (bonus,
  intents, glossary, quota) and no learned part (``fusion-tuned-base``), the same with the query tower
  (``fusion-tuned``, no memory); ``fields-description`` / ``fields-queries`` ``fusion-tuned-base`` with the BM25 field
  of ``fields.py`` (purpose and Description; doc2query-style pseudo-queries) fused too; ``no-memory``
  everything but the query memory; ``no-reader`` everything but the reader (the default since session 12);
  ``with-reader`` the default plus the reader of ``reader.py`` on a close call, where its file fits the
  model; ``default`` the defaults of ``FusionWeights``: the query tower, the memory and the reranker of
  ``rerank.py``."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from .errors import IndexerError
from .fusion import FusionWeights
from .schema import MANUAL_SOURCE, Hit
from .text import strip_compiler_locations

WINDOW_WORDS = 120
STRIDE_WORDS = 60

#: ablations of the real retriever, as fusion weights
_PLAIN = dict(
    instruction=0.0,
    stub_factor=1.0,
    glossary=False,
    asks_instruction_factor=1.0,
    history_factor=1.0,
    pack_share=1.0,
    dense_rewrite=False,
    tower=False,
    memory=False,
    rerank=False,
)
ABLATIONS: dict[str, FusionWeights] = {
    "bm25": FusionWeights(lexical=1, title=0, dense=0, summary=0, **_PLAIN),  # type: ignore[arg-type]
    "dense": FusionWeights(lexical=0, title=0, dense=1, summary=0, **_PLAIN),  # type: ignore[arg-type]
    "dense-tower": FusionWeights(
        lexical=0,
        title=0,
        dense=1,
        summary=0,
        **{**_PLAIN, "tower": True, "memory": False},  # type: ignore[arg-type]
    ),
    "dense-memory": FusionWeights(
        lexical=0,
        title=0,
        dense=1,
        summary=0,
        **{**_PLAIN, "tower": True, "memory": True},  # type: ignore[arg-type]
    ),
    "fusion": FusionWeights(lexical=1, title=1, dense=1, summary=1, **_PLAIN),  # type: ignore[arg-type]
    "fusion-tuned-base": FusionWeights(rerank=False, tower=False),
    "fusion-tuned": FusionWeights(rerank=False, memory=False),
    # the section fields of fields.py beside fusion-tuned (weights the best of a dev grid; both lost
    # there to fusion-tuned, so the default leaves them out)
    "fields-description": FusionWeights(rerank=False, tower=False, description=0.5),
    "fields-queries": FusionWeights(rerank=False, tower=False, queries=0.5),
    "no-memory": FusionWeights(memory=False),
    "no-reader": FusionWeights(reader=False),
    "with-reader": FusionWeights(reader=True),
    "default": FusionWeights(),
}
#: every ablation name ``eval-retrieval --ablation`` takes, baseline first
ABLATION_NAMES = ("bm25-chunks", *ABLATIONS)


def windows(words: list[str], size: int = WINDOW_WORDS, stride: int = STRIDE_WORDS) -> list[list[str]]:
    """Fixed-size word windows; the last one ends at the last word (a short text is one window)."""
    if len(words) <= size:
        return [words]
    out = [words[i : i + size] for i in range(0, len(words) - size + 1, stride)]
    if (len(words) - size) % stride:
        out.append(words[-size:])
    return out


class ChunkBM25:
    """Plain BM25 over fixed-size chunks of one manual collection of a ``Retriever``'s index."""

    def __init__(self, retriever: Any, version: str | None = None) -> None:
        import bm25s

        self._retriever = retriever
        self._version = version or retriever.versions(MANUAL_SOURCE)[0]
        keys = retriever._keys(self._version, [MANUAL_SOURCE])
        self._loaded = retriever._collection(keys[0])
        texts, self._row_of_window = [], []
        for row, s in enumerate(self._loaded.sections):
            for w in windows(f"{s.title}\n{s.text}".split()):
                texts.append(" ".join(w))
                self._row_of_window.append(row)
        self._bm25s = bm25s
        self._index = bm25s.BM25(k1=1.2, b=0.75)
        self._index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.windows = len(texts)

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        version: str | None = None,
        sources: list[str] | None = None,
        exclude_sections: Collection[str] = (),
    ) -> list[Hit]:
        if version not in (None, self._version) or (sources and list(sources) != [MANUAL_SOURCE]):
            raise IndexerError(f"the chunk BM25 baseline covers PTX ISA {self._version} only")
        tokens = self._bm25s.tokenize(
            [strip_compiler_locations(query)], stopwords="en", show_progress=False, return_ids=False
        )[0]
        vocab = self._index.vocab_dict
        known = [t for t in tokens if t in vocab]
        n_sections = len(self._loaded.sections)
        best = np.zeros(n_sections, dtype=np.float32)
        if known:
            scores = np.asarray(self._index.get_scores(known), dtype=np.float32)
            np.maximum.at(best, np.asarray(self._row_of_window), scores)
        order = np.argsort(-best, kind="stable")
        hits: list[Hit] = []
        for row in order:
            if best[row] <= 0 or len(hits) >= k:
                break
            if self._loaded.sections[row].number in exclude_sections:
                continue
            hits.append(self._retriever._hit(self._loaded, int(row), float(best[row])))
        return hits


class Ablation:
    """The real retriever searching with other fusion weights."""

    def __init__(self, retriever: Any, weights: FusionWeights) -> None:
        self._retriever = retriever
        self._weights = weights

    def search(
        self, query: str, k: int = 5, *, version: str | None = None, sources: list[str] | None = None
    ) -> list[Hit]:
        return list(self._retriever.search(query, k, version=version, sources=sources, weights=self._weights))


def searcher(name: str, retriever: Any, version: str | None = None) -> Any:
    """The searcher of ablation ``name`` (one of ``ABLATION_NAMES``)."""
    if name == "bm25-chunks":
        return ChunkBM25(retriever, version)
    if name in ABLATIONS:
        return Ablation(retriever, ABLATIONS[name])
    raise IndexerError(f"unknown ablation {name!r}; choose from {', '.join(ABLATION_NAMES)}")
