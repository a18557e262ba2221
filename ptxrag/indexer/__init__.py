"""Indexer: manual loaders (HTML, PDF, Markdown), chunks, Chroma + BM25 index, hybrid retriever.

    from ptxrag.indexer import Retriever, build_index
    build_index()                                   # added manuals + the bundled knowledge pack
    hits = Retriever().search("mbarrier.try_wait.parity", k=5)

The indexer knows nothing of agents or the sandbox; any agent can use the retriever.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    ArchitectureNotDocumentedError,
    IndexerError,
    IndexNotBuiltError,
    ManualFormatError,
    ManualNotFoundError,
    ModelMismatchError,
)
from .schema import Chunk, CollectionReport, Hit, IndexReport, Manual, ManualDiff, Section

# heavier parts load on first use, so `from ptxrag.indexer import Hit` stays light
_LAZY = {
    "Retriever": ".retriever",
    "build_index": ".build",
    "BuildProgress": ".build",
    "load_manual": ".loaders",
    "add_manual": ".library",
    "list_added": ".library",
    "load_added": ".library",
    "remove_added": ".library",
    "official_manuals": ".library",
    "diff_manuals": ".diff",
    "evaluate": ".evaluation",
    "load_queries": ".evaluation",
    "ChunkingParams": ".chunking",
    "FusionWeights": ".fusion",
    "DEFAULT_MODEL": ".embedding",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'ptxrag.indexer' has no attribute {name!r}")
    return getattr(importlib.import_module(mod, __name__), name)


__all__ = [
    "DEFAULT_MODEL",
    "ArchitectureNotDocumentedError",
    "BuildProgress",
    "Chunk",
    "ChunkingParams",
    "CollectionReport",
    "FusionWeights",
    "Hit",
    "IndexNotBuiltError",
    "IndexReport",
    "IndexerError",
    "Manual",
    "ManualDiff",
    "ManualFormatError",
    "ManualNotFoundError",
    "ModelMismatchError",
    "Retriever",
    "Section",
    "add_manual",
    "build_index",
    "diff_manuals",
    "evaluate",
    "list_added",
    "load_added",
    "load_manual",
    "load_queries",
    "official_manuals",
    "remove_added",
]
