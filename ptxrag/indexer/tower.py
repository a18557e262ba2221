"""A learned query tower: the top transformer layers of the embedding model, fine-tuned on the query side.

The packaged all-MiniLM-L6-v2 was trained on web text: a PTX question that does not name its instruction
("count the one bits of a register") lands far from the section that answers it ("Population count.").
``eval/retrieval/train_query_tower.py`` fine-tunes the model's top layers so that written training
queries rank their own section first among all sections, scored against the chunk embeddings *as indexed*
(the base model): the index needs no rebuild, and a tower trained for one model's files is used only with
those files (fingerprint).

Where a tower fits the model, a query is embedded through it instead of the base model (one pass, so a
search costs what it did): it gives the ``dense`` signal (``FusionWeights.tower`` switches it off for
ablations). The file holds only the tuned layers' weights (float16)."""

from __future__ import annotations

import copy
import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .embedding import Embedder, ModelSpec
from .errors import IndexerError

TOWER_PATH = Path(__file__).with_name("adapters") / "all-MiniLM-L6-v2.tower.npz"


class QueryTower:
    """Tuned weights for some of the model's layers (``layers``: their indices, lowest first)."""

    def __init__(
        self, state: dict[str, np.ndarray], layers: list[int], fingerprint: str, meta: dict[str, Any]
    ) -> None:
        self.state = state
        self.layers = layers
        self.fingerprint = fingerprint
        self.meta = meta
        self._built: dict[int, tuple[Any, Any]] = {}  # id(model) -> (model, its tuned layers)
        self._build_lock = threading.Lock()  # searches from several threads build the layers once

    def embed(self, embedder: Embedder, query: str) -> np.ndarray:
        """One query through ``embedder``'s model below this tower's layers, then this tower's."""
        model = embedder.model
        built = self._built.get(id(model))
        if built is None:
            with self._build_lock:
                built = self._built.get(id(model))
                if built is None:
                    built = self._built[id(model)] = (model, self.build(model))
        return encode_tuned(model, built[1], self.layers[0], query)

    def build(self, model: Any) -> Any:
        """Copies of ``model``'s tuned layers (a sentence-transformers model) holding this tower's
        weights, in the model's dtype, ready to run."""
        import torch

        bert = model[0].auto_model
        n = len(bert.encoder.layer)
        if self.layers != list(range(n - len(self.layers), n)):
            raise IndexerError(
                f"query tower layers {self.layers} are not the top layers of a {n}-layer model"
            )
        out = torch.nn.ModuleList()
        for i in self.layers:
            layer = copy.deepcopy(bert.encoder.layer[i])
            prefix = f"layer.{i}."
            own = {k[len(prefix) :]: v for k, v in self.state.items() if k.startswith(prefix)}
            dtype = next(layer.parameters()).dtype
            tensors = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)).to(dtype) for k, v in own.items()}
            missing, unexpected = layer.load_state_dict(tensors, strict=False)
            if missing or unexpected:
                raise IndexerError(f"query tower layer {i} does not fit the model: {missing or unexpected}")
            out.append(layer.eval())
        return out


def encode_tuned(model: Any, tuned: Any, first_tuned: int, query: str) -> np.ndarray:
    """The tuned embedding of one query (mean pooling, unit length): the model's own layers below
    ``first_tuned``, then the tower's. One unpadded text needs no attention mask."""
    import torch

    prepare = getattr(model, "preprocess", None) or model.tokenize
    feats = prepare([query])
    bert = model[0].auto_model
    with torch.inference_mode():
        h = bert.embeddings(input_ids=feats["input_ids"], token_type_ids=feats.get("token_type_ids"))
        for layer in [*bert.encoder.layer[:first_tuned], *tuned]:
            out = layer(h, None)
            h = out[0] if isinstance(out, tuple) else out
        vec = torch.nn.functional.normalize(h[0].float().mean(dim=0), dim=0)
    return vec.numpy()


def save_tower(path: Path, state: dict[str, np.ndarray], spec: ModelSpec, meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {f"w:{k}": np.asarray(v, dtype=np.float16) for k, v in state.items()}
    arrays["fingerprint"] = np.asarray(spec.fingerprint)
    arrays["meta"] = np.asarray(json.dumps(meta, sort_keys=True))
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]


@lru_cache(maxsize=4)
def _load(path: str) -> QueryTower | None:
    p = Path(path)
    if not p.is_file():
        return None
    with np.load(p) as z:
        state = {k[2:]: z[k] for k in z.files if k.startswith("w:")}
        meta = json.loads(str(z["meta"]))
        return QueryTower(state, [int(i) for i in meta["layers"]], str(z["fingerprint"]), meta)


def tower_for(spec: ModelSpec, path: Path = TOWER_PATH) -> QueryTower | None:
    """The tower trained for ``spec``'s model files, or None (another model, or no tower file)."""
    found = _load(str(path))
    return found if found is not None and found.fingerprint == spec.fingerprint else None
