"""``build_index``: the added manuals and the bundled knowledge pack into Chroma (dense) and BM25 (lexical).

A collection is rebuilt only when its content hash, the chunking parameters or the embedding model changed;
otherwise the build touches nothing and imports neither torch nor Chroma (an unchanged re-index takes well
under a second)."""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import lexical
from .catalog import CollectionEntry, IndexManifest, Store, collection_key, now_iso
from .chunking import ChunkingParams, chunk_sections
from .embedding import DEFAULT_MODEL, Embedder, ModelSpec, describe, resolve_model, same_model
from .errors import IndexerError
from .library import forget_previous, list_added, load_added, manual_file
from .pack import KnowledgeDocLike, as_section, content_hash, group_by_source, pack_documents
from .schema import BUNDLED_VERSION, MANUAL_SOURCE, CollectionReport, IndexReport, Section

#: progress callback: (label, done, total); label names the collection and the step
BuildProgress = Callable[[str, int, int], None]

_ADD_BATCH = 1000


@dataclass
class _Pending:
    source: str
    version: str
    content_sha256: str
    load: Callable[[], list[Section]]
    architectures: list[str]


def _manual_sources(home: Path | None, versions: Iterable[str] | None) -> list[_Pending]:
    wanted = set(versions) if versions is not None else None
    out = []
    for rec in list_added(home, MANUAL_SOURCE):
        if wanted is not None and rec.version not in wanted:
            continue
        sha = hashlib.sha256(manual_file(rec, home).read_bytes()).hexdigest()

        def load(v: str = rec.version) -> list[Section]:
            return list(load_added(v, home=home).sections)

        out.append(_Pending(rec.source, rec.version, sha, load, rec.architectures))
    return out


def _knowledge_sources(
    docs: Iterable[KnowledgeDocLike] | None, skipped: list[str]
) -> tuple[list[_Pending], bool]:
    """Pending knowledge collections, and whether the pack could be read at all."""
    if docs is None:
        try:
            docs = pack_documents()
        except ImportError as e:
            skipped.append(f"knowledge pack: ptxrag.corpus is not importable ({e})")
            return [], False
        except (ValueError, OSError) as e:  # corpus.CorpusError is a ValueError
            raise IndexerError(f"the knowledge pack cannot be read: {e}") from e
    try:
        groups = group_by_source(docs)
    except ValueError as e:
        raise IndexerError(str(e)) from e
    out = []
    for source, group in sorted(groups.items()):
        sections = [as_section(d) for d in group]

        def load(secs: list[Section] = sections) -> list[Section]:
            return secs

        out.append(_Pending(source, BUNDLED_VERSION, content_hash(group), load, []))
    return out, True


def _physical_name(source: str, version: str) -> str:
    return f"{source}-{version}-{uuid.uuid4().hex[:8]}"


def _metadata(c: Any) -> dict[str, Any]:
    return {
        "section_number": c.section_number,
        "title": c.title,
        "version": c.version,
        "source": c.source,
        "url": c.url or "",
        "breadcrumb": c.breadcrumb,
        "ordinal": c.ordinal,
        "instructions": " ".join(c.instructions),
    }


def _build_collection(
    store: Store,
    pending: _Pending,
    embedder: Embedder,
    params: ChunkingParams,
    progress: BuildProgress | None,
) -> tuple[CollectionEntry, int, float]:
    label = f"{pending.source} {pending.version}"

    def step(name: str, done: int) -> None:
        if progress is not None:
            progress(f"{label}: {name}", done, 1)

    step("reading sections", 0)
    sections = pending.load()
    step("reading sections", 1)
    if not sections:
        raise IndexerError(f"{label}: nothing to index (no sections)")
    step("chunking", 0)
    chunks = chunk_sections(sections, source=pending.source, version=pending.version, params=params)
    step("chunking", 1)

    def on_embed(done: int, total: int) -> None:
        if progress is not None:
            progress(f"{label}: embedding", done, total)

    t0 = time.perf_counter()
    vectors = embedder.encode([c.text for c in chunks], progress=on_embed)
    embed_s = time.perf_counter() - t0
    physical = _physical_name(pending.source, pending.version)
    try:
        collection = store.client().create_collection(
            physical,
            embedding_function=None,
            metadata={"hnsw:space": "cosine", "source": pending.source, "version": pending.version},
        )
        for start in range(0, len(chunks), _ADD_BATCH):
            part = chunks[start : start + _ADD_BATCH]
            collection.add(
                ids=[c.chunk_id for c in part],
                embeddings=vectors[start : start + len(part)],
                documents=[c.text for c in part],
                metadatas=[_metadata(c) for c in part],
            )
            if progress is not None:
                progress(f"{label}: storing", min(start + _ADD_BATCH, len(chunks)), len(chunks))
        step("BM25 index", 0)
        folder = store.lexical_dir(physical)
        store.write_records(folder, sections, chunks)
        store.write_vectors(folder, vectors)
        lexical.build(folder, sections)
        step("BM25 index", 1)
    except BaseException:
        store.drop_physical(physical)
        raise
    entry = CollectionEntry(
        source=pending.source,
        version=pending.version,
        physical=physical,
        content_sha256=pending.content_sha256,
        chunking=params.model_dump(),
        model=describe(embedder.spec),
        sections=len(sections),
        chunks=len(chunks),
        architectures=pending.architectures,
        built_at=now_iso(),
    )
    return entry, len(chunks), embed_s


#: written before a build changes the index, removed when it ends; found at the start of a build, it says an
#: earlier build was killed and may have left Chroma collections and folders that no manifest names
BUILD_MARKER = ".build-in-progress"
_UUID_DIR = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _segment_dirs(store: Store) -> list[Path]:
    if not store.chroma_dir.is_dir():
        return []
    return [p for p in store.chroma_dir.iterdir() if p.is_dir() and _UUID_DIR.match(p.name)]


def _may_have_orphans(store: Store, manifest: IndexManifest) -> bool:
    """Cheap (no Chroma import): a killed build's marker, lexical folders or more segment folders than the
    manifest's collections explain."""
    if (store.index_dir / BUILD_MARKER).exists():
        return True
    named = {e.physical for e in manifest.collections.values()}
    if store.lexical_root.is_dir() and any(p.name not in named for p in store.lexical_root.iterdir()):
        return True
    return len(_segment_dirs(store)) > len(named)


def clean_orphans(store: Store, manifest: IndexManifest) -> list[str]:
    """Drop what no manifest names: Chroma collections and lexical folders of killed builds, and segment
    folders Chroma no longer knows (a delete killed half way). Returns what was removed."""
    named = {e.physical for e in manifest.collections.values()}
    removed: list[str] = []
    if store.chroma_dir.is_dir():
        for col in store.client().list_collections():
            name = getattr(col, "name", col)
            if name not in named:
                store.drop_physical(str(name))
                removed.append(f"collection {name}")
        known: set[str] | None = None
        db = store.chroma_dir / "chroma.sqlite3"
        if db.is_file():
            with (
                contextlib.suppress(sqlite3.Error),
                contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con,
            ):
                known = {str(r[0]) for r in con.execute("SELECT id FROM segments")}
        if known is not None:  # only with Chroma's own list of segments; never guess
            for d in _segment_dirs(store):
                if d.name not in known:
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(f"folder chroma/{d.name}")
    if store.lexical_root.is_dir():
        for d in store.lexical_root.iterdir():
            if d.name not in named:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(f"folder lexical/{d.name}")
    return removed


def build_index(
    home: Path | None = None,
    *,
    model: str | None = None,
    versions: Iterable[str] | None = None,
    knowledge: bool = True,
    knowledge_documents: Iterable[KnowledgeDocLike] | None = None,
    force: bool = False,
    chunking: ChunkingParams | None = None,
    progress: BuildProgress | None = None,
) -> IndexReport:
    """Index every added manual (or only ``versions``) and the knowledge pack.

    ``model`` None keeps the model the index was built with (the default model for a new index); another
    model rebuilds everything. ``knowledge_documents`` replaces the bundled pack (tests, other packs)."""
    t_start = time.perf_counter()
    store = Store(home)
    manifest = store.manifest()
    params = chunking or ChunkingParams()
    if model is None and manifest.model is not None:
        model = manifest.model.get("location") if manifest.model.get("name") != DEFAULT_MODEL else None
    spec: ModelSpec = resolve_model(model)
    skipped: list[str] = []
    pending = _manual_sources(home, versions)
    if not pending:
        wanted = f" of version(s) {', '.join(versions)}" if versions is not None else ""
        skipped.append(
            f"no manual{wanted} added: `ptxrag corpus add ptx-isa --version V --from PATH` adds one"
        )
    knowledge_ok = False
    if knowledge:
        found, knowledge_ok = _knowledge_sources(knowledge_documents, skipped)
        pending += found

    reports: list[CollectionReport] = []
    collections = dict(manifest.collections)
    todo: list[tuple[_Pending, str, str]] = []
    for p in pending:
        key = collection_key(p.source, p.version)
        old = collections.get(key)
        reason = ""
        if old is None:
            reason = "new"
        elif force:
            reason = "forced"
        elif not same_model(old.model, spec):
            reason = f"model changed ({old.model.get('name')} -> {spec.name})"
        elif old.content_sha256 != p.content_sha256:
            reason = "content changed"
        elif old.chunking != params.model_dump():
            reason = "chunking changed"
        elif not (store.lexical_dir(old.physical) / "sections.jsonl").is_file():
            reason = "index files missing"
        if reason:
            todo.append((p, key, reason))
        else:
            reports.append(
                CollectionReport(
                    source=p.source,
                    version=p.version,
                    collection=old.physical if old else "",
                    action="unchanged",
                    sections=old.sections if old else 0,
                    chunks=old.chunks if old else 0,
                )
            )

    # collections whose source is gone: manuals removed, knowledge sources no longer present
    present = {collection_key(p.source, p.version) for p in pending}
    stale = [
        k
        for k, e in collections.items()
        if k not in present
        and (e.source == MANUAL_SOURCE and versions is None or (e.source != MANUAL_SOURCE and knowledge_ok))
    ]

    if _may_have_orphans(store, manifest):
        if progress is not None:
            progress("cleaning up after an interrupted build", 0, 1)
        removed = clean_orphans(store, manifest)
        if removed:
            skipped.append(f"removed what an interrupted build left: {', '.join(removed)}")
        if progress is not None:
            progress("cleaning up after an interrupted build", 1, 1)
    marker = store.index_dir / BUILD_MARKER
    if todo or stale:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(now_iso(), encoding="utf-8")
    try:
        _apply(store, manifest, spec, params, todo, stale, collections, reports, progress)
    finally:
        marker.unlink(missing_ok=True)  # a killed process never gets here: the next build cleans up
    if todo or manifest.model is None:
        store.write_manifest(IndexManifest(model=describe(spec), collections=collections))
    return IndexReport(
        home=str(store.home),
        model=spec.name,
        collections=tuple(reports),
        skipped=tuple(skipped),
        wall_s=round(time.perf_counter() - t_start, 3),
    )


def _apply(
    store: Store,
    manifest: IndexManifest,
    spec: ModelSpec,
    params: ChunkingParams,
    todo: list[tuple[_Pending, str, str]],
    stale: list[str],
    collections: dict[str, CollectionEntry],
    reports: list[CollectionReport],
    progress: BuildProgress | None,
) -> None:
    """Build what is to do and drop what is stale, switching the manifest after each collection."""
    embedder: Embedder | None = None
    for p, key, reason in todo:
        t0 = time.perf_counter()
        if embedder is None:
            if progress is not None:
                progress(f"loading model {spec.name}", 0, 1)
            embedder = Embedder(spec)
            if progress is not None:
                progress(f"loading model {spec.name}", 1, 1)
        entry, n_chunks, embed_s = _build_collection(store, p, embedder, params, progress)
        old = collections.get(key)
        collections[key] = entry
        store.write_manifest(IndexManifest(model=describe(spec), collections=collections))
        if old is not None:
            store.drop_physical(old.physical)
        if p.source == MANUAL_SOURCE:
            forget_previous(p.version, home=store.home)  # the new manual is indexed: the old copy may go
        reports.append(
            CollectionReport(
                source=p.source,
                version=p.version,
                collection=entry.physical,
                action="built" if old is None else "rebuilt",
                reason=reason,
                sections=entry.sections,
                chunks=n_chunks,
                embed_s=round(embed_s, 3),
                wall_s=round(time.perf_counter() - t0, 3),
            )
        )
    for key in stale:
        old = collections.pop(key)
        store.write_manifest(IndexManifest(model=manifest.model or describe(spec), collections=collections))
        store.drop_physical(old.physical)
        reports.append(
            CollectionReport(
                source=old.source,
                version=old.version,
                collection=old.physical,
                action="removed",
                reason="its source is gone",
            )
        )
