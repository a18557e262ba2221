"""Query memory: the written training queries, embedded by the query tower, as extra vectors of their sections.

A section is represented in the dense signal by its chunks. The query tower (``tower.py``) was trained so
that a question lands near the chunks of the section that answers it, but a new question is still a
question and a chunk is still prose. The written training queries (``eval/retrieval/training/``, about
24 per section of 9.1, in a dozen voices) are questions too: embedded by the same tower and kept as extra
vectors of the section each was written for, they let a new question match an earlier one that was asked
of the same section (document expansion with written queries, as doc2query does with generated ones).
A section then scores its best chunk *or* its best remembered query, whichever is nearer.

The file (``adapters/<model>.memory.npz``, int8 vectors with a scale per row) records the model and the
query tower it was embedded with; it is used only with those (another tower embeds queries elsewhere).
Entries are tied to a section by number *and* title, so a manual of another version uses the entries of
the sections it shares with 9.1 (same number and title, or the same title under a new number where that
title is used once in each), and a section new in that version simply has none: it competes with its
chunks, as every section did before. Built by ``eval/retrieval/build_query_memory.py``;
``FusionWeights.memory`` switches it off (the ``no-memory`` ablation)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .embedding import ModelSpec
from .schema import Section
from .tower import TOWER_PATH, QueryTower

MEMORY_PATH = Path(__file__).with_name("adapters") / "all-MiniLM-L6-v2.memory.npz"


def tower_digest(path: Path = TOWER_PATH) -> str:
    """What identifies a tower file's weights (its bytes' sha256)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _norm_title(title: str) -> str:
    return " ".join(title.split()).lower()


@dataclass(frozen=True)
class Placed:
    """A collection's share of the memory: vectors grouped by section row (``starts`` opens each group
    in ``vectors``; ``rows[i]`` is group i's section row, ``entry_rows[j]`` entry j's)."""

    vectors: np.ndarray
    rows: np.ndarray
    starts: np.ndarray
    entry_rows: np.ndarray

    def best(self, qvec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each entry's cosine with ``qvec`` and each section group's best."""
        sims = self.vectors @ qvec
        return sims, np.maximum.reduceat(sims, self.starts)


class QueryMemory:
    """Remembered queries: unit vectors (float32), the section number, its title and the round of each."""

    def __init__(
        self,
        vectors: np.ndarray,
        sections: list[str],
        titles: list[str],
        rounds: list[str],
        fingerprint: str,
        tower: str,
        meta: dict[str, Any],
    ) -> None:
        self.vectors = vectors
        self.sections = sections
        self.titles = [_norm_title(t) for t in titles]
        self.rounds = np.asarray(rounds)
        self.fingerprint = fingerprint
        self.tower = tower
        self.meta = meta

    def __len__(self) -> int:
        return len(self.sections)

    def place(self, sections: list[Section], without_round: str | None = None) -> Placed | None:
        """This memory's entries for a collection of ``sections`` (None when none fits), without the
        entries of round ``without_round`` (the reranker's trainer scores a held-out query that way, so
        that queries written beside it in the same round do not stand in for it). The caller keeps the
        result with the collection (one memory serves every index of the process)."""
        row_of = {s.number: i for i, s in enumerate(sections)}
        title_of = [_norm_title(s.title) for s in sections]
        here = Counter(title_of)
        there = Counter(title for _, title in set(zip(self.sections, self.titles, strict=True)))
        by_title = {t: i for i, t in enumerate(title_of) if here[t] == 1}
        pairs = []
        for i, (number, title) in enumerate(zip(self.sections, self.titles, strict=True)):
            if without_round is not None and self.rounds[i] == without_round:
                continue
            row = row_of.get(number)
            if row is None or title_of[row] != title:
                row = by_title.get(title) if there[title] == 1 else None
            if row is not None:
                pairs.append((row, i))
        placed = None
        if pairs:
            pairs.sort()
            rows = np.asarray([r for r, _ in pairs], dtype=np.int64)
            idx = np.asarray([i for _, i in pairs], dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            placed = Placed(
                vectors=np.ascontiguousarray(self.vectors[idx]),
                rows=rows[starts],
                starts=starts,
                entry_rows=rows,
            )
        return placed


def save_memory(
    path: Path,
    vectors: np.ndarray,
    sections: list[str],
    titles: list[str],
    rounds: list[str],
    spec: ModelSpec,
    tower: str,
    meta: dict[str, Any],
) -> None:
    """Write ``vectors`` (unit rows) as int8 with a float32 scale per row."""
    v = np.asarray(vectors, dtype=np.float32)
    scale = np.maximum(np.abs(v).max(axis=1), 1e-8) / 127.0
    q = np.clip(np.rint(v / scale[:, None]), -127, 127).astype(np.int8)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        vectors=q,
        scale=scale.astype(np.float32),
        sections=np.asarray(sections),
        titles=np.asarray(titles),
        rounds=np.asarray(rounds),
        fingerprint=np.asarray(spec.fingerprint),
        tower=np.asarray(tower),
        meta=np.asarray(json.dumps(meta, sort_keys=True)),
    )


@lru_cache(maxsize=4)
def _load(path: str) -> QueryMemory | None:
    p = Path(path)
    if not p.is_file():
        return None
    with np.load(p) as z:
        v = z["vectors"].astype(np.float32) * z["scale"][:, None]
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-8)
        return QueryMemory(
            np.ascontiguousarray(v),
            [str(s) for s in z["sections"]],
            [str(s) for s in z["titles"]],
            [str(s) for s in z["rounds"]],
            str(z["fingerprint"]),
            str(z["tower"]),
            json.loads(str(z["meta"])),
        )


@lru_cache(maxsize=4)
def _digest(path: str) -> str:
    return tower_digest(Path(path))


def memory_for(
    spec: ModelSpec,
    tower: QueryTower | None,
    path: Path = MEMORY_PATH,
    tower_path: Path = TOWER_PATH,
) -> QueryMemory | None:
    """The memory embedded for ``spec``'s model through the tower in ``tower_path``, or None (no tower, no
    memory file, another model, or a memory embedded by another tower)."""
    if tower is None or not tower_path.is_file():
        return None
    found = _load(str(path))
    if found is None or found.fingerprint != spec.fingerprint:
        return None
    return found if found.tower == _digest(str(tower_path)) else None
