"""The knowledge pack (``ptxrag.corpus``: contracts, patterns, hints, templates, hardware cards) as indexable
sections, one collection per source, so a search can return a contract rule or a pattern next to the manual
section it cites."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from .instructions import NAME_RE, base_name, names_in_text
from .schema import KNOWLEDGE_SOURCES, Section
from .text import unique


class KnowledgeDocLike(Protocol):
    """What the indexer reads of a ``ptxrag.corpus.KnowledgeDoc``."""

    @property
    def source(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def path(self) -> Path: ...
    @property
    def cites(self) -> tuple[str, ...]: ...


def pack_documents(sources: Iterable[str] | None = None) -> list[KnowledgeDocLike]:
    """Documents of the bundled knowledge pack (``ptxrag.corpus.iter_documents``)."""
    from ptxrag.corpus import iter_documents

    return list(iter_documents(list(sources) if sources is not None else None))


def as_section(doc: KnowledgeDocLike) -> Section:
    tags = [base_name(t) for t in doc.tags]
    defines = unique(t for t in tags if t and NAME_RE.match(t))
    cites = ", ".join(doc.cites)
    text = doc.text.strip()
    if cites:
        text = f"{text}\n\nCites PTX ISA sections: {cites}"
    return Section(
        number=doc.doc_id,
        title=doc.title,
        anchor=None,
        url=None,
        parents=(),
        text=text,
        defines=defines,
        mentions=tuple(n for n in names_in_text(doc.text) if n not in defines)[:60],
    )


def group_by_source(docs: Iterable[KnowledgeDocLike]) -> dict[str, list[KnowledgeDocLike]]:
    groups: dict[str, list[KnowledgeDocLike]] = {}
    for d in docs:
        if d.source not in KNOWLEDGE_SOURCES:
            raise ValueError(f"knowledge document {d.doc_id!r} has unknown source {d.source!r}")
        groups.setdefault(d.source, []).append(d)
    for docs_of in groups.values():
        docs_of.sort(key=lambda d: d.doc_id)
    return groups


def content_hash(docs: Iterable[KnowledgeDocLike]) -> str:
    h = hashlib.sha256()
    for d in docs:
        for part in (d.doc_id, d.title, d.text, "\x1f".join(d.tags), "\x1f".join(d.cites)):
            h.update(part.encode("utf-8"))
            h.update(b"\x1e")
    return h.hexdigest()
