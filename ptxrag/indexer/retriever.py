"""``Retriever``: hybrid search over the index. Usable without the CLI::

    from ptxrag.indexer import Retriever
    hits = Retriever().search("mbarrier.try_wait.parity", k=5)

How a search ranks (see ``fusion.py``): BM25 over whole sections, BM25 over section titles and dense
similarity of the best chunk are fused; sections that define a PTX instruction named in the query (exactly,
or the longest defined name the query names a variant of) are lifted above the rest. Results are whole
sections, one hit per section."""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .catalog import CollectionEntry, Store, collection_key
from .chunking import breadcrumb
from .embedding import DEFAULT_MODEL, Embedder, ModelSpec, resolve_model, same_model
from .errors import (
    ArchitectureNotDocumentedError,
    IndexerError,
    IndexNotBuiltError,
    ManualNotFoundError,
    ModelMismatchError,
)
from .fusion import Candidate, FusionWeights, fuse
from .instructions import match_sections, names_in_query
from .lexical import LexicalIndex, query_tokens
from .memory import Placed, QueryMemory, memory_for
from .reader import Reader, reader_for, reader_text
from .rerank import RERANK_DEPTH, Reranker, Row, features, load_reranker
from .schema import BUNDLED_VERSION, KNOWLEDGE_SOURCES, MANUAL_SOURCE, Hit, Section
from .text import arch_key, strip_compiler_locations, tokenize, version_key
from .tower import QueryTower, tower_for

#: how many chunks the dense search returns per collection before grouping by section
DENSE_CANDIDATES = 48
_UNPLACED = object()
#: how many of the nearest remembered queries vote for their sections (a reranker feature)
MEMORY_VOTERS = 16
#: a section with subsections and less text than this of its own is a stub (an introduction)
STUB_CHARS = 300
#: query embeddings remembered per retriever
QUERY_CACHE = 512
#: a query asking for an instruction ("which instruction ...", "... instruction that ...")
_ASKS_INSTRUCTION = re.compile(
    r"\b(?:instruction|opcode|mnemonic)s?\b(?!\s+(?:types?|sets?|descriptions?|descriptors?|operands?)\b)",
    re.I,
)


_ASKS_HISTORY = re.compile(
    r"\b(?:which|what|since|when)\b.*\b(?:versions?|releases?)\b|\bversion (?:that|which) (?:added|introduced)"
    r"|\b(?:introduced|first (?:supported|appeared?)|new in|changes? in)\b",
    re.I,
)
_RELEASE_NOTE = re.compile(r"^Changes in PTX ISA Version", re.I)


_QUESTION = re.compile(
    r"^\s*(?:which|what)\s+(?:ptx\s+)?(?:instructions?|opcodes?|mnemonics?)\s+"
    r"(?:(?:does|do|is|are|can|will|should)\s+)?",
    re.I,
)


def dense_query(query: str) -> str:
    """The text embedded for the dense signal: "which instruction frees tensor memory columns?" ->
    "frees tensor memory columns" (the sections describe, they do not ask)."""
    out = _QUESTION.sub("", query).rstrip(" ?")
    return out or query


def asks_history(query: str) -> bool:
    """True when the query asks which ISA version added or changed something."""
    return bool(_ASKS_HISTORY.search(query))


def asks_instruction(query: str) -> bool:
    """True when the query asks which instruction does something (not when it names one)."""
    return bool(_ASKS_INSTRUCTION.search(query))


@dataclass(frozen=True)
class Fused:
    """A search's candidates in fused order, with what the reranker needs besides."""

    ranked: list[tuple[Candidate, float]]
    bonus: dict[tuple[str, str], float]
    intents: dict[str, bool]
    weights: FusionWeights


@dataclass
class _Loaded:
    """One collection, loaded for searching."""

    entry: CollectionEntry
    sections: list[Section]
    row_of: dict[str, int]
    chunk_section: dict[str, int]
    lexical: LexicalIndex
    crumbs: list[str]
    stubs: set[int] = field(default_factory=set)
    """rows of sections with subsections and little text of their own"""
    chroma: Any = None
    vectors: np.ndarray | None = None
    """chunk embeddings, for an exact scan"""
    vector_rows: np.ndarray | None = None
    """the section row of each vector"""
    defines: dict[str, tuple[str, ...]] = field(default_factory=dict)
    memory: dict[str | None, Placed | None] = field(default_factory=dict)
    """the query memory's share of this collection, per round left out (``QueryMemory.place``)"""
    reader_texts: dict[int, str] = field(default_factory=dict)
    """what the reader sees of each section read so far (``reader.reader_text``)"""


def _named_first(order: list[int], pack: list[bool], named: list[bool]) -> list[int]:
    """``order`` with no knowledge-pack document ahead of the first manual section defining an instruction
    the query names (a contract tagged with the name, or a template using it, comes after the reference):
    those ranked above it move to just below it, in their order."""
    first = [i for i in order if not pack[i] and named[i]]
    if not first:
        return order
    at = order.index(first[0])
    ahead = [i for i in order[:at] if pack[i]]
    return [i for i in order[: at + 1] if not pack[i]] + ahead + order[at + 1 :]


def _quota(ranked: list[tuple[Candidate, float]], k: int, pack_slots: int) -> list[tuple[Candidate, float]]:
    """The top ``k`` with at most ``pack_slots`` knowledge-pack documents: long contracts and templates
    match many words of any query and would otherwise push the manual's sections out. Those over the
    quota come after the manual's sections (order kept)."""
    if pack_slots >= k:
        return ranked[:k]
    top: list[tuple[Candidate, float]] = []
    over: list[tuple[Candidate, float]] = []
    pack = 0
    for cand, score in ranked:
        if len(top) >= k:
            break
        is_pack = not cand.key[0].startswith(MANUAL_SOURCE + "@")
        if is_pack and pack >= pack_slots:
            over.append((cand, score))
            continue
        pack += is_pack
        top.append((cand, score))
    return (top + over)[:k]


def _name_bonus(
    qnames: list[Any], defines: dict[tuple[str, str], tuple[str, ...]]
) -> dict[tuple[str, str], float]:
    """The instruction-name bonus, matched within the manual and within the knowledge pack separately;
    beside the manual a pack document's bonus is capped at the manual's best (a contract tagged with the
    exact spelling ``setmaxnreg.inc.sync.aligned.u32`` must not outrank the manual section that defines
    ``setmaxnreg``, nor take the bonus alone)."""
    manual = {k: v for k, v in defines.items() if k[0].startswith(MANUAL_SOURCE + "@")}
    pack = {k: v for k, v in defines.items() if k not in manual}
    bonus = match_sections(qnames, manual) if manual else {}
    if pack:
        extra = match_sections(qnames, pack)
        if manual:
            cap = max(bonus.values(), default=0.0)
            extra = {k: min(v, cap) for k, v in extra.items()}
        bonus.update(extra)
    return bonus


class Retriever:
    """Search the manuals and knowledge pack indexed under ``home`` (``PTXRAG_HOME`` by default)."""

    def __init__(
        self, home: Path | None = None, model: str | None = None, *, weights: FusionWeights | None = None
    ):
        self.store = Store(home)
        manifest = self.store.manifest()
        if not manifest.collections:
            raise IndexNotBuiltError(
                f"no index under {self.store.home}: run `ptxrag index` (after `ptxrag corpus add ptx-isa "
                "--version V --from PATH` for a manual)"
            )
        built_with = manifest.model or {}
        if model is not None:
            spec = resolve_model(model)
            if not same_model(built_with, spec):
                raise ModelMismatchError(
                    f"the index under {self.store.home} was built with embedding model "
                    f"{built_with.get('name')!r}, not {spec.name!r}: query with that model, or rebuild "
                    f"with `ptxrag index --model {model}`"
                )
        else:
            name = built_with.get("name")
            spec = resolve_model(None if name in (None, DEFAULT_MODEL) else built_with.get("location"))
        stale = [k for k, e in manifest.collections.items() if not same_model(e.model, spec)]
        if stale:
            raise ModelMismatchError(
                f"collections {stale} were built with another embedding model than {spec.name!r} "
                "(an interrupted rebuild?): run `ptxrag index` again"
            )
        self.spec: ModelSpec = spec
        self.tower: QueryTower | None = tower_for(spec)
        """the learned query tower (``tower.py``) that embeds queries, when one fits the model"""
        self.memory: QueryMemory | None = memory_for(spec, self.tower)
        """the written training queries embedded by that tower, as extra vectors of their sections
        (``memory.py``), when a memory embedded by that tower is packaged"""
        self.reranker: Reranker | None = load_reranker()
        """the learned reranker of the fused candidates (``rerank.py``), when one is packaged"""
        self.reader: Reader | None = reader_for(spec)
        """the learned cross-encoder over the reranker's first candidates (``reader.py``), when one fits
        the model"""
        self.weights = weights or FusionWeights()
        self._entries: dict[str, CollectionEntry] = dict(manifest.collections)
        self._loaded: dict[str, _Loaded] = {}
        self._embedder: Embedder | None = None
        self._query_cache: dict[tuple[str, bool], np.ndarray] = {}
        self._lock = threading.RLock()  # agents search from several threads

    # --- catalogue ------------------------------------------------------------------------------------
    def versions(self, source: str = MANUAL_SOURCE) -> list[str]:
        """Indexed versions of ``source``, newest first."""
        vs = {e.version for e in self._entries.values() if e.source == source}
        return sorted(vs, key=version_key, reverse=True)

    def sources(self) -> list[str]:
        return sorted({e.source for e in self._entries.values()})

    def version_for_arch(self, arch: str) -> str:
        """The newest indexed manual that documents ``arch`` (``sm_100a`` needs a manual with tcgen05)."""
        arch = arch.strip().lower()
        if not arch.startswith("sm_"):
            raise IndexerError(f"{arch!r} is not a target architecture like sm_90a")
        for v in self.versions(MANUAL_SOURCE):
            if arch in self._entries[collection_key(MANUAL_SOURCE, v)].architectures:
                return v
        have = {
            v: (self._entries[collection_key(MANUAL_SOURCE, v)].architectures or ["?"])
            for v in self.versions(MANUAL_SOURCE)
        }
        newest = ", ".join(f"{v} (up to {max(a, key=arch_key)})" for v, a in have.items()) or "none"
        raise ArchitectureNotDocumentedError(
            f"no indexed PTX ISA manual documents {arch}; indexed: {newest}. Add a newer manual with "
            "`ptxrag corpus add ptx-isa --version V` and run `ptxrag index`"
        )

    # --- loading --------------------------------------------------------------------------------------
    def _collection(self, key: str) -> _Loaded:
        with self._lock:
            return self._load_collection(key)

    def _load_collection(self, key: str) -> _Loaded:
        loaded = self._loaded.get(key)
        if loaded is None:
            entry = self._entries[key]
            folder = self.store.lexical_dir(entry.physical)
            if not (folder / "sections.jsonl").is_file():
                raise IndexNotBuiltError(
                    f"index files of {key} are missing under {folder}: run `ptxrag index`"
                )
            sections = self.store.read_sections(folder)
            chunks = self.store.read_chunks(folder)
            row_of = {s.number: i for i, s in enumerate(sections)}
            by_number = {s.number: s for s in sections}
            loaded = _Loaded(
                entry=entry,
                sections=sections,
                row_of=row_of,
                chunk_section={c.chunk_id: row_of[c.section_number] for c in chunks},
                lexical=LexicalIndex(folder),
                crumbs=[breadcrumb(s, by_number) for s in sections],
                defines={s.number: s.defines for s in sections},
            )
            parents = {p for s in sections for p in s.parents[-1:]}
            loaded.stubs = {
                i for i, s in enumerate(sections) if s.number in parents and len(s.text) < STUB_CHARS
            }
            self._loaded[key] = loaded
        return loaded

    def _chroma(self, loaded: _Loaded) -> Any:
        with self._lock:
            return self._open_chroma(loaded)

    def _open_chroma(self, loaded: _Loaded) -> Any:
        if loaded.chroma is None:
            try:
                loaded.chroma = self.store.chroma_collection(loaded.entry.physical)
            except Exception as e:  # chroma raises its own NotFound types
                raise IndexNotBuiltError(
                    f"Chroma collection {loaded.entry.physical} is missing: run `ptxrag index` ({e})"
                ) from e
        return loaded.chroma

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = Embedder(self.spec)
            return self._embedder

    def _query_vector(self, query: str, tuned: bool) -> np.ndarray:
        """A query's embedding, through the query tower when ``tuned`` and one fits the model, remembered
        (agents repeat queries across rounds)."""
        use = self.tower if tuned else None
        key = (query, use is not None)
        vec = self._query_cache.get(key)
        if vec is None:
            emb = self.embedder()
            vec = use.embed(emb, query) if use is not None else emb.encode_query(query)
            with self._lock:
                while len(self._query_cache) >= QUERY_CACHE:
                    self._query_cache.pop(next(iter(self._query_cache)))
                self._query_cache[key] = vec
        return vec

    def clear_query_cache(self) -> None:
        """Forget remembered query embeddings (to time searches as if each query were new)."""
        with self._lock:
            self._query_cache.clear()

    def _keys(self, version: str | None, sources: Iterable[str] | None) -> list[str]:
        wanted = list(sources) if sources is not None else [MANUAL_SOURCE, *KNOWLEDGE_SOURCES]
        known = set(self.sources())
        unknown = [s for s in wanted if s not in known and s not in (MANUAL_SOURCE, *KNOWLEDGE_SOURCES)]
        if unknown:
            raise ManualNotFoundError(f"unknown source(s) {unknown}; indexed: {sorted(known)}")
        keys = []
        for s in wanted:
            if s == MANUAL_SOURCE:
                versions = self.versions(MANUAL_SOURCE)
                if version is not None and version not in versions:
                    raise ManualNotFoundError(
                        f"PTX ISA {version} is not indexed (indexed: {', '.join(versions) or 'none'}); "
                        f"`ptxrag corpus add ptx-isa --version {version} --from PATH` then `ptxrag index`"
                    )
                v = version or (versions[0] if versions else None)
                if v is not None:
                    keys.append(collection_key(s, v))
            elif collection_key(s, BUNDLED_VERSION) in self._entries:
                keys.append(collection_key(s, BUNDLED_VERSION))
        if not keys:
            raise IndexNotBuiltError(f"nothing indexed for sources {wanted}: run `ptxrag index`")
        return keys

    # --- search ---------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int = 5,
        *,
        version: str | None = None,
        sources: list[str] | None = None,
        exclude_sections: Collection[str] = (),
        weights: FusionWeights | None = None,
    ) -> list[Hit]:
        """The ``k`` best sections for ``query``. ``version`` picks the manual (newest by default);
        ``sources`` limits to some of "ptx-isa", "contracts", "patterns", "hints", "templates", "hardware"
        (all by default);
        ``exclude_sections`` drops sections (or knowledge document ids) already seen; ``weights``
        replaces the retriever's fusion weights for this search (ablations)."""
        if not query or not query.strip():
            raise IndexerError("empty query")
        if k < 1:
            raise IndexerError(f"k must be at least 1, got {k}")
        query = strip_compiler_locations(query)
        keys = self._keys(version, sources)
        w = weights or self.weights
        # sections already seen are dropped after ranking, so the scores of a search with exclusions
        # are those of the same search without them (the agent compares the two)
        fused = self.fused(query, keys, w)
        ranked = fused.ranked
        if w.rerank and self.reranker is not None and len(ranked) > 1:
            ranked = self._rerank(self.reranker, query, fused)
            if w.reader and self.reader is not None:
                ranked = self._read(self.reader, query, ranked, fused.bonus, w)
        excluded = set(exclude_sections)
        ranked = [(c, v) for c, v in ranked if c.key[1] not in excluded]
        hits = []
        for cand, score in _quota(ranked, k, self._pack_slots(keys, k, w)):
            loaded = self._loaded[cand.key[0]]
            hits.append(self._hit(loaded, loaded.row_of[cand.key[1]], score))
        return hits

    def fused(
        self, query: str, keys: list[str], w: FusionWeights, *, memory_without: str | None = None
    ) -> Fused:
        """The candidates of collections ``keys`` in fused order (before the reranker).
        ``memory_without`` leaves one round of the query memory out (its trainers' held-out queries).
        Compiler locations are taken out of ``query`` here too, for the trainers that call this directly."""
        query = strip_compiler_locations(query)
        qvec = self._query_vector(dense_query(query) if w.dense_rewrite else query, w.tower)
        memory = self.memory if (w.memory and w.tower and self.tower is not None) else None
        tokens = query_tokens(query) if w.glossary else tokenize(query)
        candidates: list[Candidate] = []
        defines: dict[tuple[str, str], tuple[str, ...]] = {}
        for key in keys:
            loaded = self._collection(key)
            placed = self._placed(memory, key, loaded, memory_without) if memory is not None else None
            candidates.extend(self._candidates(key, loaded, tokens, qvec, w, placed))
            for number, names in loaded.defines.items():
                if names:
                    defines[(key, number)] = names
        vocab = {n for names in defines.values() for n in names}
        bonus = _name_bonus(names_in_query(query, vocab), defines)
        intents = {"asks_instruction": asks_instruction(query), "asks_history": asks_history(query)}
        return Fused(fuse(candidates, bonus, w, **intents), bonus, intents, w)

    def _placed(
        self, memory: QueryMemory, key: str, loaded: _Loaded, without_round: str | None
    ) -> Placed | None:
        """The memory's share of collection ``key`` (``QueryMemory.place``), computed once per collection
        of this retriever and round left out."""
        got = loaded.memory.get(without_round, _UNPLACED)
        if got is _UNPLACED:
            got = memory.place(loaded.sections, without_round)
            with self._lock:
                loaded.memory[without_round] = got
        return got  # type: ignore[return-value]

    def _rerank(self, reranker: Reranker, query: str, fused: Fused) -> list[tuple[Candidate, float]]:
        """The first ``RERANK_DEPTH`` candidates reordered by the reranker. Their scores become the
        reranker's softmax probability relative to the best (1.0 first, 0.5 = half as likely), the rest
        follow below the last of them in fused order."""
        top, rest = fused.ranked[:RERANK_DEPTH], fused.ranked[RERANK_DEPTH:]
        rows = self.rerank_rows(top, fused.bonus, fused.weights)
        s = reranker.scores(features(rows, strip_compiler_locations(query), **fused.intents))
        rel = np.exp(s - s.max())
        order = [int(i) for i in np.argsort(-rel, kind="stable")]
        # when the query names an instruction the manual defines, no pack document passes the first
        # manual section defining it
        order = _named_first(order, [r.pack for r in rows], [r.bonus > 0 for r in rows])
        out, floor = [], 1.0
        for i in order:
            floor = min(floor, float(rel[i]))  # scores never rise down the list
            out.append((top[i][0], floor))
        if rest:
            floor *= 0.5
            first = rest[0][1] or 1.0
            out += [(c, floor * max(v, 0.0) / first) for c, v in rest]
        return out

    def _read(
        self,
        reader: Reader,
        query: str,
        ranked: list[tuple[Candidate, float]],
        bonus: dict[tuple[str, str], float],
        w: FusionWeights,
    ) -> list[tuple[Candidate, float]]:
        """The reranked list with its first ``w.reader_k`` candidates reordered by the reranker's
        log-probability plus ``w.reader_mix`` x the reader's score, when the second is at least
        ``w.reader_gate`` as likely as the first (else unchanged). Scores stay relative probabilities,
        never rising; the rest keep theirs, scaled down where the reordered ones fell below them."""
        k = min(w.reader_k, len(ranked))
        if k < 2 or ranked[1][1] < w.reader_gate:
            return ranked
        top, rest = ranked[:k], ranked[k:]
        texts = [self._reader_text(c.key) for c, _ in top]
        emb = self.embedder()
        with self._lock:
            reader.ready(emb)
        s = reader.scores(emb, query, texts)
        new = np.log(np.maximum([v for _, v in top], 1e-12)) + w.reader_mix * (s - s.max())
        rel = np.exp(new - new.max())
        order = [int(i) for i in np.argsort(-rel, kind="stable")]
        pack = [not c.key[0].startswith(MANUAL_SOURCE + "@") for c, _ in top]
        order = _named_first(
            order, pack, [not p and bonus.get(c.key, 0.0) > 0 for p, (c, _) in zip(pack, top, strict=True)]
        )
        out, floor = [], 1.0
        for i in order:
            floor = min(floor, float(rel[i]))
            out.append((top[i][0], floor))
        old = top[-1][1]
        scale = min(1.0, floor / old) if old > 0 else 1.0
        return out + [(c, v * scale) for c, v in rest]

    def _reader_text(self, key: tuple[str, str]) -> str:
        loaded = self._loaded[key[0]]
        row = loaded.row_of[key[1]]
        text = loaded.reader_texts.get(row)
        if text is None:
            text = loaded.reader_texts[row] = reader_text(loaded.sections[row], loaded.crumbs[row])
        return text

    def rerank_rows(
        self, ranked: list[tuple[Candidate, float]], bonus: dict[tuple[str, str], float], w: FusionWeights
    ) -> list[Row]:
        """The reranker's view of fused candidates (also what its trainer records)."""
        rows = []
        for cand, score in ranked:
            b = bonus.get(cand.key, 0.0)
            sec = self._loaded[cand.key[0]].sections[self._loaded[cand.key[0]].row_of[cand.key[1]]]
            rows.append(
                Row(
                    cand=cand,
                    fused=score - w.instruction * b,
                    bonus=b,
                    title=f"{sec.title} {' '.join(sec.defines)}",
                    pack=not cand.key[0].startswith(MANUAL_SOURCE + "@"),
                )
            )
        return rows

    def _pack_slots(self, keys: list[str], k: int, w: FusionWeights) -> int:
        """How many of the top ``k`` knowledge-pack documents may take beside the manual."""
        manual = any(self._entries[key].source == MANUAL_SOURCE for key in keys)
        if not manual or w.pack_share >= 1:
            return k
        return max(1, round(k * w.pack_share))

    def _candidates(
        self,
        key: str,
        loaded: _Loaded,
        tokens: list[str],
        qvec: np.ndarray,
        w: FusionWeights,
        placed: Placed | None = None,
    ) -> list[Candidate]:
        out: dict[int, Candidate] = {}

        def cand(row: int) -> Candidate:
            c = out.get(row)
            if c is None:
                sec = loaded.sections[row]
                c = out[row] = Candidate(
                    key=(key, sec.number),
                    stub=row in loaded.stubs,
                    defines=bool(sec.defines),
                    history=bool(_RELEASE_NOTE.match(sec.title)),
                )
            return c

        signals = [
            ("lexical", loaded.lexical.section_scores(tokens)),
            ("title", loaded.lexical.title_scores(tokens)),
        ]
        gist = loaded.lexical.summary_scores(tokens)
        if gist is not None:
            signals.append(("summary", gist))
        for name in ("description", "queries"):
            field = loaded.lexical.field_scores(name, tokens) if getattr(w, name) > 0 else None
            if field is not None:
                signals.append((name, field))
        for attr, scores in signals:
            top = np.argsort(-scores)[:50]
            for row in top:
                if scores[row] > 0:
                    setattr(cand(int(row)), attr, float(scores[row]))
        best, nearest, parts = self._dense(loaded, qvec, placed)
        for row in nearest:
            cand(int(row))
        if best is not None:
            for row, c in out.items():
                c.dense = float(best[row])
        if parts is not None:
            chunk, remembered, votes = parts
            for row, c in out.items():
                c.chunk = float(chunk[row])
                if remembered[row] > -1.0:
                    c.remembered = float(remembered[row])
                c.votes = float(votes.get(row, 0.0))
        else:  # no memory here: the dense evidence is all chunks
            for c in out.values():
                c.chunk = c.dense
        return list(out.values())

    def _vectors(self, loaded: _Loaded) -> tuple[np.ndarray, np.ndarray]:
        if loaded.vectors is None or loaded.vector_rows is None:
            with self._lock:
                folder = self.store.lexical_dir(loaded.entry.physical)
                saved = self.store.read_vectors(folder, len(loaded.chunk_section))
                if loaded.vectors is None and saved is not None:
                    loaded.vector_rows = np.asarray(list(loaded.chunk_section.values()), dtype=np.int64)
                    loaded.vectors = np.ascontiguousarray(saved)
                if loaded.vectors is None:
                    got = self._chroma(loaded).get(include=["embeddings"])
                    rows = [loaded.chunk_section.get(cid, -1) for cid in got["ids"]]
                    keep = [i for i, r in enumerate(rows) if r >= 0]
                    vecs = np.asarray(got["embeddings"], dtype=np.float32).reshape(-1, self._dim(got))
                    loaded.vector_rows = np.asarray([rows[i] for i in keep], dtype=np.int64)
                    loaded.vectors = np.ascontiguousarray(vecs[keep])
        assert loaded.vectors is not None and loaded.vector_rows is not None
        return loaded.vectors, loaded.vector_rows

    @staticmethod
    def _dim(got: Any) -> int:
        emb = got["embeddings"]
        return len(emb[0]) if len(emb) else 1

    def _dense(
        self, loaded: _Loaded, qvec: np.ndarray, placed: Placed | None = None
    ) -> tuple[np.ndarray | None, list[int], tuple[np.ndarray, np.ndarray, dict[int, float]] | None]:
        """Per section the cosine similarity of its best chunk (exact: every chunk vector is scanned, a
        matrix product of a few milliseconds at most), or of its best remembered query where ``placed``
        (the query memory's share of this collection) has a nearer one, and the sections of the
        ``DENSE_CANDIDATES`` nearest vectors, nearest first; with a memory also, for the reranker, each
        section's best chunk, its best remembered query (-1 without any) and the share of the
        ``MEMORY_VOTERS`` nearest remembered queries written for it. The vectors are read once per
        collection, from the index's ``vectors.npy`` (else from Chroma, for an index built before that file)."""
        vecs, rows = self._vectors(loaded)
        if not len(rows):
            return None, [], None
        sims = vecs @ qvec
        best = np.full(len(loaded.sections), -1.0, dtype=np.float32)
        np.maximum.at(best, rows, sims)
        parts = None
        if placed is not None:
            msims, mbest = placed.best(qvec)
            chunk = best.copy()
            remembered = np.full(len(loaded.sections), -1.0, dtype=np.float32)
            remembered[placed.rows] = mbest
            v = min(MEMORY_VOTERS, len(msims))
            near = placed.entry_rows[np.argpartition(-msims, v - 1)[:v]]
            owners, counts = np.unique(near, return_counts=True)
            parts = (chunk, remembered, {int(o): c / v for o, c in zip(owners, counts, strict=True)})
            best[placed.rows] = np.maximum(best[placed.rows], mbest)
            sims = np.concatenate([sims, msims])
            rows = np.concatenate([rows, placed.entry_rows])
        n = min(DENSE_CANDIDATES, len(sims))
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top])]
        return best, [int(rows[i]) for i in top], parts

    def _hit(self, loaded: _Loaded, row: int, score: float) -> Hit:
        s = loaded.sections[row]
        return Hit(
            section_number=s.number,
            title=s.title,
            version=loaded.entry.version,
            source=loaded.entry.source,
            url=s.url,
            score=round(score, 6),
            text=s.text,
            breadcrumb=loaded.crumbs[row],
            instructions=list(s.defines),
        )

    def read_section(
        self, number: str, *, version: str | None = None, source: str = MANUAL_SOURCE
    ) -> Hit | None:
        """One section (or knowledge document) by number; None when that version has no such section."""
        if source == MANUAL_SOURCE:
            versions = self.versions(source)
            v = version or (versions[0] if versions else None)
            if v is None or v not in versions:
                raise ManualNotFoundError(
                    f"PTX ISA {version} is not indexed (indexed: {', '.join(versions)})"
                )
        else:
            v = BUNDLED_VERSION
        key = collection_key(source, v)
        if key not in self._entries:
            raise ManualNotFoundError(f"{source} is not indexed: run `ptxrag index`")
        loaded = self._collection(key)
        row = loaded.row_of.get(number.strip().rstrip("."))
        return None if row is None else self._hit(loaded, row, 1.0)
