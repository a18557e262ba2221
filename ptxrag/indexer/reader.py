"""A small learned cross-encoder (the "reader") over the first few reranked candidates.

A single query vector cannot tell siblings apart that differ in one word: "bitmask of the lanes with a
smaller lane id than mine" lands as near ``%lanemask_gt`` as ``%lanemask_lt``. The reader reads the query
and a candidate together ("[CLS] query [SEP] title : purpose and Description [SEP]", ``max_len`` tokens at
most) through the lowest ``layers`` transformer layers of all-MiniLM-L6-v2, fine-tuned, and scores the
pair from the [CLS] state (a linear head). The model's own word, position and type embeddings are used
frozen, so the artefact holds only the kept layers and the head (float16) and is used only with the model
files it was trained for (fingerprint), like the query tower.

The score is a linear head on the [CLS] state plus a learned scale times the late-interaction match of
the jointly read tokens (each query token's best cosine with a candidate token, averaged over the query;
``head`` "maxsim" in the file's settings), which already prefers the right one of two close candidates
before any training.

It runs after the reranker on the first ``FusionWeights.reader_k`` candidates when the second of them is
at least ``FusionWeights.reader_gate`` as likely as the first (a close call); each candidate's new score is the
reranker's log-probability relative to the best plus ``FusionWeights.reader_mix`` x the reader's score,
and those are reordered by it. k, mix and gate live with the fusion weights because they are chosen for
the whole stack in use (``eval/retrieval/choose_stack.py``); the file's ``k``, ``mix`` and ``gate`` record
what its trainer chose for the stack of its day. It is off by default since session 12
(``FusionWeights(reader=True)`` and the ``with-reader`` ablation switch it on): on a held-out set written
after the rule was set, it gained as many first places as it lost (docs/retrieval.md). On the searches it
reads (about one in eight at gate 0.5) it costs about 9 ms at one torch thread and 5 ms at two for two
candidates, twice that for five. ``eval/retrieval/train_reader.py`` trains it."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .embedding import Embedder, ModelSpec
from .errors import IndexerError
from .fields import description
from .schema import Section
from .tower import save_tower

READER_PATH = Path(__file__).with_name("adapters") / "all-MiniLM-L6-v2.reader.npz"
#: most query tokens a pair keeps (the candidate's text fills the rest of ``max_len``)
QUERY_TOKENS = 32
_NUMBER = re.compile(r"^\d+(?:\.\d+)*\s+")


def reader_text(section: Section, crumb: str) -> str:
    """What the reader sees of a candidate: the last two levels of its breadcrumb without numbers, the
    names it defines, then its purpose and Description prose (its text where it has none)."""
    parts = [_NUMBER.sub("", p) for p in crumb.split(" > ")[-2:]] or [section.title]
    head = " > ".join(parts)
    if section.defines:
        head += " (" + ", ".join(section.defines[:4]) + ")"
    body = description(section) or section.text
    return f"{head} : {' '.join(body[:800].split())}"


def doc_ids(tok: Any, text: str, max_len: int) -> list[int]:
    """A candidate's token ids (no special tokens), at most ``max_len``."""
    return list(tok(text, add_special_tokens=False, truncation=True, max_length=max_len)["input_ids"])


def pair_ids(
    cls: int, sep: int, query: Sequence[int], doc: Sequence[int], max_len: int
) -> tuple[list[int], list[int]]:
    """Token ids and type ids of "[CLS] query [SEP] doc [SEP]", the doc cut to fit ``max_len``."""
    q = list(query[:QUERY_TOKENS])
    room = max(1, max_len - len(q) - 3)
    ids = [cls, *q, sep, *doc[:room], sep]
    types = [0] * (len(q) + 2) + [1] * (len(ids) - len(q) - 2)
    return ids, types


def batch(
    pairs: Sequence[tuple[list[int], list[int]]], pad: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, types, mask) padded to the longest pair."""
    n = max(len(p[0]) for p in pairs)
    ids = np.full((len(pairs), n), pad, dtype=np.int64)
    types = np.zeros((len(pairs), n), dtype=np.int64)
    mask = np.zeros((len(pairs), n), dtype=bool)
    for i, (a, t) in enumerate(pairs):
        ids[i, : len(a)] = a
        types[i, : len(t)] = t
        mask[i, : len(a)] = True
    return ids, types, mask


def forward(
    bert: Any, layers: Any, head: Any, ids: Any, types: Any, mask: Any, sep: int = -1, scale: Any = None
) -> Any:
    """Reader scores of a padded batch (torch tensors): the model's frozen embeddings, the reader's
    layers (padding masked out of attention), a linear head on the [CLS] state; with ``scale``, plus
    ``scale`` x the late-interaction match of the jointly read tokens (each query token's best cosine
    with a candidate token, averaged over the query; [CLS] and [SEP] (id ``sep``) left out)."""
    import torch

    h = bert.embeddings(input_ids=ids, token_type_ids=types)
    dtype = h.dtype
    add = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)[:, None, None, :]
    for layer in layers:
        out = layer(h, add)
        h = out[0] if isinstance(out, tuple) else out
    score = head(h[:, 0]).squeeze(-1)
    if scale is None:
        return score
    words = mask & (ids != sep)
    q = words & (types == 0)
    q[:, 0] = False
    d = words & (types == 1)
    hn = torch.nn.functional.normalize(h.float(), dim=-1)
    sim = (hn @ hn.transpose(1, 2)).masked_fill(~d[:, None, :], -2.0)
    best = sim.max(dim=-1).values
    match = (best * q).sum(-1) / q.sum(-1).clamp(min=1)
    return score.float() + scale.float() * match


def score_pairs(
    bert: Any,
    layers: Any,
    head: Any,
    pairs: Sequence[tuple[list[int], list[int]]],
    pad: int,
    sep: int,
    scale: Any = None,
) -> Any:
    """``forward`` over ``pairs`` (``pair_ids`` results), padded into one batch: their scores (a tensor)."""
    import torch

    ids, types, mask = batch(pairs, pad)
    return forward(
        bert, layers, head, torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask), sep, scale
    )


class Reader:
    """The reader's weights (``layer.{i}.*`` for its layers, ``head.*``) and settings (``meta``: layers,
    max_len, k, mix, gate; ``head`` "maxsim" adds the token match to the [CLS] score)."""

    def __init__(self, state: dict[str, np.ndarray], fingerprint: str, meta: dict[str, Any]) -> None:
        self.state = state
        self.fingerprint = fingerprint
        self.meta = meta
        self.layers = int(meta["layers"])
        self.max_len = int(meta["max_len"])
        self.k = int(meta["k"])
        self.maxsim = meta.get("head", "cls") == "maxsim"
        self._built: dict[int, tuple[Any, Any, Any, Any]] = {}  # id(model) -> (model, layers, head, scale)
        self._docs: dict[str, list[int]] = {}  # a candidate's text -> its token ids

    def build(self, model: Any) -> tuple[Any, Any, Any]:
        """Copies of ``model``'s lowest layers holding the reader's weights, its head, in the model's
        dtype (a sentence-transformers model), and the scale of the token match (None without one)."""
        import torch

        bert = model[0].auto_model
        if self.layers > len(bert.encoder.layer):
            raise IndexerError(f"the reader has {self.layers} layers, the model {len(bert.encoder.layer)}")
        dtype = next(bert.parameters()).dtype
        layers = torch.nn.ModuleList()
        for i in range(self.layers):
            layer = copy.deepcopy(bert.encoder.layer[i])
            prefix = f"layer.{i}."
            own = {k[len(prefix) :]: v for k, v in self.state.items() if k.startswith(prefix)}
            tensors = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)).to(dtype) for k, v in own.items()}
            missing, unexpected = layer.load_state_dict(tensors, strict=False)
            if missing or unexpected or not own:
                raise IndexerError(f"reader layer {i} does not fit the model: {missing or unexpected}")
            layers.append(layer.eval())
        head = torch.nn.Linear(bert.config.hidden_size, 1).to(dtype)
        w, b = self.state.get("head.weight"), self.state.get("head.bias")
        if w is None or b is None or w.shape != tuple(head.weight.shape):
            raise IndexerError("the reader's head does not fit the model")
        head.weight.data = torch.from_numpy(np.asarray(w, dtype=np.float32)).to(dtype)
        head.bias.data = torch.from_numpy(np.asarray(b, dtype=np.float32)).to(dtype)
        scale = self.state.get("head.scale")
        if self.maxsim != (scale is not None):
            raise IndexerError("the reader's head does not fit its settings")
        return (
            layers,
            head.eval(),
            None if scale is None else torch.tensor(float(np.asarray(scale).ravel()[0])),
        )

    def ready(self, embedder: Embedder) -> None:
        """Build the layers for ``embedder``'s model (callers hold the retriever's lock)."""
        model = embedder.model
        if id(model) not in self._built:
            self._built[id(model)] = (model, *self.build(model))

    def scores(self, embedder: Embedder, query: str, docs: Sequence[str]) -> np.ndarray:
        """The reader's score of ``query`` with each of ``docs`` (``reader_text``s; their tokens are
        remembered)."""
        import torch

        self.ready(embedder)
        model, layers, head, scale = self._built[id(embedder.model)]
        tok = model.tokenizer
        q = tok(query, add_special_tokens=False)["input_ids"]
        pairs = []
        for text in docs:
            d = self._docs.get(text)
            if d is None:
                d = self._docs[text] = doc_ids(tok, text, self.max_len)
            pairs.append(pair_ids(tok.cls_token_id, tok.sep_token_id, q, d, self.max_len))
        with torch.inference_mode():
            s = score_pairs(
                model[0].auto_model, layers, head, pairs, tok.pad_token_id, tok.sep_token_id, scale
            )
        return s.float().numpy()


def save_reader(path: Path, state: dict[str, np.ndarray], spec: ModelSpec, meta: dict[str, Any]) -> None:
    """The reader's file: the query tower's layout (fp16 weights under ``w:``, the model fingerprint, the
    settings as JSON), written by the same function."""
    save_tower(path, state, spec, meta)


_SETTINGS = ("layers", "max_len", "k", "mix", "gate")


@lru_cache(maxsize=4)
def _load(path: str) -> Reader | None:
    p = Path(path)
    if not p.is_file():
        return None
    try:
        with np.load(p) as z:
            state = {k[2:]: z[k] for k in z.files if k.startswith("w:")}
            meta = json.loads(str(z["meta"]))
            fingerprint = str(z["fingerprint"])
    except (OSError, ValueError, KeyError):
        return None  # not a reader file
    if not all(k in meta for k in _SETTINGS):
        return None
    return Reader(state, fingerprint, meta)


def reader_for(spec: ModelSpec, path: Path = READER_PATH) -> Reader | None:
    """The reader trained for ``spec``'s model files, or None (another model, or no reader file)."""
    found = _load(str(path))
    return found if found is not None and found.fingerprint == spec.fingerprint else None
