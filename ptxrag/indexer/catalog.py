"""Where the index lives and what it records.

Layout under the data directory (``PTXRAG_HOME`` or the per-user default)::

    index/manifest.json            what is indexed: per collection the content hash, model, chunking
    index/chroma/                  embedded Chroma (PersistentClient): one collection per source+version
    index/lexical/<collection>/    sections, chunks and BM25 indexes of that collection
    manuals/<source>/<version>/    manuals added with ``ptxrag corpus add`` (parsed, validated)

A build writes a fresh Chroma collection and lexical folder under a new name, then switches the manifest
to it in one atomic file replace, then deletes the old ones: a failed build leaves the old index whole."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ptxrag.base.paths import home as data_home

from .schema import Chunk, Section

MANIFEST_FORMAT = 1


class CollectionEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    source: str
    version: str
    physical: str = Field(description="name of the Chroma collection and of the lexical folder")
    content_sha256: str
    chunking: dict[str, Any]
    model: dict[str, str]
    sections: int
    chunks: int
    architectures: list[str] = Field(default_factory=list)
    built_at: str


class IndexManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    format: int = MANIFEST_FORMAT
    model: dict[str, str] | None = None
    collections: dict[str, CollectionEntry] = Field(default_factory=dict)


#: the chunk embeddings beside a collection's records
VECTORS_FILE = "vectors.npy"


def collection_key(source: str, version: str) -> str:
    return f"{source}@{version}"


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """Paths, manifest and Chroma client of one data directory."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home) if home is not None else data_home()
        self.index_dir = self.home / "index"
        self.manifest_path = self.index_dir / "manifest.json"
        self.chroma_dir = self.index_dir / "chroma"
        self.lexical_root = self.index_dir / "lexical"
        self.manuals_root = self.home / "manuals"
        self._client: Any = None

    # manifest ------------------------------------------------------------------------------------------
    def manifest(self) -> IndexManifest:
        if not self.manifest_path.is_file():
            return IndexManifest()
        data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        return IndexManifest.model_validate(data)

    def write_manifest(self, manifest: IndexManifest) -> None:
        atomic_write_text(self.manifest_path, manifest.model_dump_json(indent=2))

    # chroma --------------------------------------------------------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            import chromadb
            from chromadb.config import Settings

            self.chroma_dir.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(
                path=str(self.chroma_dir), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
        return self._client

    def chroma_collection(self, physical: str) -> Any:
        return self.client().get_collection(physical, embedding_function=None)

    def drop_physical(self, physical: str) -> None:
        """Delete a Chroma collection and lexical folder if present (old builds, failed staging)."""
        # chroma raises different exception types for "does not exist"
        with contextlib.suppress(Exception):
            self.client().delete_collection(physical)
        shutil.rmtree(self.lexical_root / physical, ignore_errors=True)

    # lexical files -------------------------------------------------------------------------------------
    def lexical_dir(self, physical: str) -> Path:
        return self.lexical_root / physical

    @staticmethod
    def write_records(folder: Path, sections: list[Section], chunks: list[Chunk]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sections.jsonl").write_text(
            "".join(s.model_dump_json() + "\n" for s in sections), encoding="utf-8"
        )
        (folder / "chunks.jsonl").write_text(
            "".join(c.model_dump_json() + "\n" for c in chunks), encoding="utf-8"
        )

    @staticmethod
    def write_vectors(folder: Path, vectors: Any) -> None:
        """The chunk embeddings in chunk order (``chunks.jsonl``), for the retriever's exact scan: reading
        them back from Chroma takes seconds, this file milliseconds."""
        import numpy as np

        np.save(folder / VECTORS_FILE, np.asarray(vectors, dtype=np.float32))

    @staticmethod
    def read_vectors(folder: Path, rows: int) -> Any:
        """The saved chunk embeddings, or None (an index built before they were saved, or a mismatch)."""
        import numpy as np

        path = folder / VECTORS_FILE
        if not path.is_file():
            return None
        vecs = np.load(path)
        return vecs if vecs.ndim == 2 and vecs.shape[0] == rows else None

    @staticmethod
    def read_sections(folder: Path) -> list[Section]:
        with (folder / "sections.jsonl").open(encoding="utf-8") as f:
            return [Section.model_validate_json(line) for line in f if line.strip()]

    @staticmethod
    def read_chunks(folder: Path) -> list[Chunk]:
        with (folder / "chunks.jsonl").open(encoding="utf-8") as f:
            return [Chunk.model_validate_json(line) for line in f if line.strip()]
