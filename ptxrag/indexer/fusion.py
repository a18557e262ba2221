"""Fusing the signals of a search into one ranking.

Each candidate section carries up to three scores: BM25 over its whole text, BM25 over its title (with
breadcrumb and defined names), and the cosine similarity of its best chunk. Each signal ranks all
candidates (across collections: BM25 and cosine are on comparable scales there, and a per-collection
normalisation would put every collection's best, however poor, on top); reciprocal-rank fusion combines
the ranks. The instruction bonus (``instructions.match_sections``) is added on top: it is 0.9 or more for a
section that defines a name the query asks about, larger than any fused score, so such sections lead and
the fused score orders them among themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


@dataclass
class Candidate:
    key: tuple[str, str]
    """(collection key, section number)"""
    lexical: float | None = None
    title: float | None = None
    dense: float | None = None
    summary: float | None = None
    """BM25 over the section's title and summary"""
    description: float | None = None
    """BM25 over the section's purpose and Description (``fields.description``)"""
    queries: float | None = None
    """BM25 over the section's pseudo-queries (``fields.queries``)"""
    chunk: float | None = None
    """the cosine of the section's best chunk alone (``dense`` is that or its best remembered query)"""
    remembered: float | None = None
    """the cosine of the section's best remembered query (the query memory), when it has any"""
    votes: float = 0.0
    """the share of the query's nearest remembered queries that were written for this section"""
    stub: bool = False
    """a section whose own text only introduces its subsections"""
    defines: bool = False
    """the section is the reference of one or more instructions"""
    history: bool = False
    """the section is a release note ("Changes in PTX ISA Version 8.0")"""


class FusionWeights(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    lexical: float = Field(1.0, ge=0)
    title: float = Field(0.5, ge=0)
    dense: float = Field(6.0, ge=0)
    summary: float = Field(1.0, ge=0, description="BM25 over title + summary (what the section is about)")
    description: float = Field(0.0, ge=0, description="BM25 over purpose + Description (fields.py)")
    queries: float = Field(0.0, ge=0, description="BM25 over the section's pseudo-queries (fields.py)")
    rrf_k: float = Field(10.0, gt=0, description="rank offset of reciprocal-rank fusion; small = top-heavy")
    instruction: float = Field(1.0, ge=0, description="scale of the instruction-name bonus")
    dense_rewrite: bool = Field(True, description="embed 'which instruction X?' as 'X' for the dense signal")
    tower: bool = Field(
        True,
        description="embed the query through the learned query tower (tower.py) when one fits the model; "
        "False: through the base model",
    )
    memory: bool = Field(
        True,
        description="let a section also score its nearest remembered training query (memory.py) in the "
        "dense signal, when a memory embedded by the query tower in use is packaged",
    )
    rerank: bool = Field(
        True, description="reorder the fused top candidates with the learned reranker (rerank.py)"
    )
    reader: bool = Field(
        False,
        description="reorder the reranker's first candidates on a close call with the learned reader "
        "(reader.py) when one fits the model; it costs ~9 ms at one torch thread, ~5 ms at two, on the "
        "searches it reads (about one in eight at gate 0.5). Off by default since session 12: on a new "
        "held-out set it gained nothing (docs/retrieval.md)",
    )
    reader_mix: float = Field(
        1.0,
        ge=0,
        description="weight of the reader's score beside the reranker's log-probability (chosen on dev and "
        "the tower's held-out queries with the query memory and the reranker in use; the reader file's "
        "meta keeps what its own trainer chose for the stack of its day)",
    )
    reader_k: int = Field(
        2,
        ge=2,
        le=10,
        description="how many of the reranker's first candidates the reader reads and may reorder, chosen "
        "with mix and gate (its cost grows with k: about 5 ms at two threads for 2, 10 ms for 5)",
    )
    reader_gate: float = Field(
        0.5,
        ge=0,
        le=1,
        description="the reader reads when the second candidate is at least this likely relative to the first",
    )
    glossary: bool = Field(True, description="add the manual's words for CUDA terms to the query (lexical)")
    stub_factor: float = Field(
        0.75, ge=0, le=1, description="fused-score factor of stub sections (a heading and an introduction)"
    )
    history_factor: float = Field(
        0.6,
        ge=0,
        le=1,
        description="fused-score factor of sections other than release notes when the query asks about versions",
    )
    pack_share: float = Field(
        0.4,
        ge=0,
        le=1,
        description="most of the top k that knowledge-pack documents may take when the manual is searched too",
    )
    asks_instruction_factor: float = Field(
        0.7,
        ge=0,
        le=1,
        description="fused-score factor of sections defining no instruction when the query asks for one",
    )


def _ranks(cands: list[Candidate], attr: str) -> dict[tuple[str, str], int]:
    scored = [(getattr(c, attr), c.key) for c in cands if getattr(c, attr) is not None]
    scored.sort(key=lambda t: -t[0])
    return {key: r for r, (_, key) in enumerate(scored, start=1)}


def fuse(
    cands: list[Candidate],
    bonus: Mapping[tuple[str, str], float],
    w: FusionWeights,
    *,
    asks_instruction: bool = False,
    asks_history: bool = False,
) -> list[tuple[Candidate, float]]:
    """Candidates best first with their final scores. The fused part is scaled into [0, 1)."""
    attrs = ("lexical", "title", "dense", "summary", "description", "queries")
    total_w = sum(getattr(w, a) for a in attrs) or 1.0
    best = 1.0 / (w.rrf_k + 1)
    ranks = {attr: _ranks(cands, attr) for attr in attrs}
    out = []
    for c in cands:
        fused = 0.0
        for attr in attrs:
            r = ranks[attr].get(c.key)
            if r is not None:
                fused += getattr(w, attr) / (w.rrf_k + r) / best
        fused /= total_w  # 1.0 = first on every signal
        if c.stub:
            fused *= w.stub_factor
        if asks_instruction and not c.defines:
            fused *= w.asks_instruction_factor
        if asks_history and not c.history:
            fused *= w.history_factor
        out.append((c, 0.999 * fused + w.instruction * bonus.get(c.key, 0.0)))
    out.sort(key=lambda t: -t[1])
    return out
