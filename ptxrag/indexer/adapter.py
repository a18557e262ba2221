"""A learned linear adapter on the query side of the dense signal.

The packaged all-MiniLM-L6-v2 was trained on web text; PTX questions ("count the one bits of a
register") and the manual's wording ("Population count.") sit further apart in its space than they
should. ``eval/retrieval/train_query_adapter.py`` learns a map A on pseudo-queries cut from the manual
itself (``pseudo.py``), and a query embedding q becomes normalise(q + A q) before the nearest chunks are
looked up. The chunk embeddings are untouched, so an index needs no rebuild. The adapter file records the
fingerprint of the model it was trained for and is used only with that model."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .embedding import ModelSpec

ADAPTER_PATH = Path(__file__).with_name("adapters") / "all-MiniLM-L6-v2.npz"


class QueryAdapter:
    def __init__(self, matrix: np.ndarray, fingerprint: str, meta: dict[str, object]) -> None:
        self.matrix = matrix.astype(np.float32)
        self.fingerprint = fingerprint
        self.meta = meta

    def apply(self, vec: np.ndarray) -> np.ndarray:
        out = vec + vec @ self.matrix
        return (out / max(float(np.linalg.norm(out)), 1e-12)).astype(np.float32)


def save_adapter(path: Path, matrix: np.ndarray, spec: ModelSpec, meta: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        matrix=matrix.astype(np.float16),
        fingerprint=np.asarray(spec.fingerprint),
        meta=np.asarray(json.dumps(meta, sort_keys=True)),
    )


@lru_cache(maxsize=4)
def _load(path: str) -> QueryAdapter | None:
    p = Path(path)
    if not p.is_file():
        return None
    with np.load(p) as z:
        return QueryAdapter(z["matrix"], str(z["fingerprint"]), json.loads(str(z["meta"])))


def adapter_for(spec: ModelSpec, path: Path = ADAPTER_PATH) -> QueryAdapter | None:
    """The adapter trained for ``spec``'s model files, or None (another model, or no adapter file)."""
    found = _load(str(path))
    return found if found is not None and found.fingerprint == spec.fingerprint else None
