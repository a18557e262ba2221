"""A learned linear reranker over the fused candidates.

Reciprocal-rank fusion with hand-set factors treats every signal alike for every query; which signal to
trust depends on the query and on the candidate (a compiler error names an instruction, a concept
paraphrase matches descriptions; a parent section introduces the subsection that answers). The reranker
scores the first ``RERANK_DEPTH`` fused candidates of a search with a linear function of
``FEATURES`` (each signal's rank and score relative to the query's best, the name bonus, the section's
kind, depth and title overlap with the query, and where its parent and children stand in the same list)
and orders them by it; the rest keep their fused order behind them.

The weights are learned by ``eval/retrieval/train_reranker.py`` on the dev split of the packaged set
(listwise softmax, L2, seed), and stored in ``adapters/rerank.json`` with the names of the features they
belong to; a file whose feature names differ from ``FEATURES`` is not used."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .fusion import Candidate
from .text import tokenize

RERANK_PATH = Path(__file__).with_name("adapters") / "rerank.json"
#: how many fused candidates the reranker reorders
RERANK_DEPTH = 20
_SIGNALS = ("lexical", "title", "summary", "dense")

FEATURES: tuple[str, ...] = (
    "fused",
    "bonus",
    *(f"rank_{s}" for s in _SIGNALS),
    *(f"rel_{s}" for s in _SIGNALS),
    "fused_rank",
    "stub",
    "defines",
    "defines_x_asks_instruction",
    "history",
    "history_x_asks_history",
    "depth",
    "parent_listed",
    "children_listed",
    "title_overlap",
    "pack",
    "rel_chunk",
    "rel_remembered",
    "votes",
)


@dataclass(frozen=True)
class Row:
    """One candidate as the reranker sees it."""

    cand: Candidate
    fused: float
    """the fused score without the name bonus"""
    bonus: float
    title: str
    """the candidate's title (with defined names)"""
    pack: bool


def _rank_feature(rank: int | None) -> float:
    return 1.0 / math.log2(rank + 1) if rank is not None else 0.0


def features(rows: Sequence[Row], query: str, *, asks_instruction: bool, asks_history: bool) -> np.ndarray:
    """The feature matrix (one row per candidate, columns ``FEATURES``)."""
    ranks: dict[str, dict[tuple[str, str], int]] = {}
    best: dict[str, float] = {}
    for s in _SIGNALS:
        scored = sorted(
            ((getattr(r.cand, s), r.cand.key) for r in rows if getattr(r.cand, s) is not None),
            key=lambda t: -t[0],
        )
        ranks[s] = {key: i for i, (_, key) in enumerate(scored, start=1)}
        best[s] = scored[0][0] if scored else 0.0
    best_chunk = max((r.cand.chunk for r in rows if r.cand.chunk is not None), default=0.0)
    best_remembered = max((r.cand.remembered for r in rows if r.cand.remembered is not None), default=0.0)
    listed = {r.cand.key for r in rows}
    qtok = set(tokenize(query))
    out = np.zeros((len(rows), len(FEATURES)), dtype=np.float32)
    for i, r in enumerate(rows):
        c = r.cand
        coll, number = c.key
        parent = number.rsplit(".", 1)[0] if "." in number else None
        f: list[float] = [r.fused, r.bonus]
        f += [_rank_feature(ranks[s].get(c.key)) for s in _SIGNALS]
        for s in _SIGNALS:
            v = getattr(c, s)
            if v is None:
                f.append(0.0)
            elif s == "dense":
                f.append(1.0 + v - best[s])  # cosine behind the query's best
            else:
                f.append(v / best[s] if best[s] > 0 else 0.0)
        ttok = set(tokenize(r.title))
        f += [
            _rank_feature(i + 1),
            float(c.stub),
            float(c.defines),
            float(c.defines and asks_instruction),
            float(c.history),
            float(c.history and asks_history),
            min(number.count(".") + 1, 8) / 8.0,
            float(parent is not None and (coll, parent) in listed),
            min(sum(1 for k in listed if k[0] == coll and k[1].startswith(number + ".")), 5) / 5.0,
            len(qtok & ttok) / len(qtok) if qtok else 0.0,
            float(r.pack),
            1.0 + c.chunk - best_chunk if c.chunk is not None else 0.0,
            1.0 + c.remembered - best_remembered if c.remembered is not None else 0.0,
            c.votes,
        ]
        out[i] = f
    return out


class Reranker:
    def __init__(self, weights: np.ndarray, mean: np.ndarray, scale: np.ndarray, meta: dict[str, object]):
        self.weights = weights
        self.mean = mean
        self.scale = scale
        self.meta = meta

    def scores(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    def to_json(self) -> str:
        return json.dumps(
            {
                "features": list(FEATURES),
                "weights": [round(float(v), 6) for v in self.weights],
                "mean": [round(float(v), 6) for v in self.mean],
                "scale": [round(float(v), 6) for v in self.scale],
                "meta": self.meta,
            },
            indent=1,
        )


@lru_cache(maxsize=4)
def _load(path: str) -> Reranker | None:
    p = Path(path)
    if not p.is_file():
        return None
    d = json.loads(p.read_text(encoding="utf-8"))
    if tuple(d.get("features", ())) != FEATURES:
        return None  # trained on other features: retrain with eval/retrieval/train_reranker.py
    arr = {k: np.asarray(d[k], dtype=np.float32) for k in ("weights", "mean", "scale")}
    return Reranker(arr["weights"], arr["mean"], arr["scale"], dict(d.get("meta", {})))


def load_reranker(path: Path = RERANK_PATH) -> Reranker | None:
    """The trained reranker, or None when there is none for today's features."""
    return _load(str(path))
