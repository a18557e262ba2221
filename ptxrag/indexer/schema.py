"""Typed records of the indexer: manual sections, chunks, search hits and build reports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ManualFormat = Literal["markdown", "html", "pdf"]

#: the source name of the PTX ISA manual; knowledge-pack sources are named after their corpus folder
MANUAL_SOURCE = "ptx-isa"
KNOWLEDGE_SOURCES: tuple[str, ...] = ("contracts", "patterns", "hints", "templates", "hardware")
#: the version recorded for knowledge-pack documents (they travel with the code, not with a manual)
BUNDLED_VERSION = "bundled"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Section(_Frozen):
    """One numbered section of a manual, holding its own text only (never its children's)."""

    number: str = Field(description='dotted section number, e.g. "9.7.13.15.16"')
    title: str = Field(description="heading text without the number, markup removed")
    anchor: str | None = Field(None, description="the HTML anchor of the heading, when known")
    url: str | None = Field(None, description="absolute URL of the section in the official manual")
    parents: tuple[str, ...] = Field((), description="numbers of the enclosing sections, outermost first")
    text: str = Field("", description="cleaned body: paragraphs, ``` code blocks and | tables |")
    defines: tuple[str, ...] = Field((), description="PTX instructions this section is the reference for")
    mentions: tuple[str, ...] = Field((), description="PTX instructions named in the text")

    @property
    def depth(self) -> int:
        return self.number.count(".") + 1


class Manual(_Frozen):
    """A parsed manual: the section tree of one version, in document order."""

    source: str = MANUAL_SOURCE
    version: str
    format: ManualFormat
    origin: str = Field(description="the file, folder or URL it was read from")
    sections: tuple[Section, ...]
    duplicates_dropped: int = Field(
        0, description="repeated copies of a section (parents repeating children)"
    )

    def by_number(self) -> dict[str, Section]:
        return {s.number: s for s in self.sections}

    def architectures(self) -> list[str]:
        """Target architectures (sm_XX[a|f]) the manual names anywhere, sorted."""
        from .text import arch_key, architectures_in

        found: set[str] = set()
        for s in self.sections:
            found |= architectures_in(s.text)
        return sorted(found, key=arch_key)


class Chunk(_Frozen):
    """One retrievable piece of a section; ``text`` starts with the breadcrumb."""

    chunk_id: str
    source: str
    version: str
    section_number: str
    title: str
    breadcrumb: str
    url: str | None
    ordinal: int = Field(description="position of the chunk inside its section, from 0")
    text: str
    instructions: tuple[str, ...] = ()


class Hit(_Frozen):
    """One search result: a whole section (or knowledge document), best chunk first."""

    section_number: str = Field(description="manual section number, or the knowledge document's id")
    title: str
    version: str
    source: str
    url: str | None
    score: float = Field(description="fused relevance score; higher is better, comparable within one search")
    text: str
    breadcrumb: str
    instructions: list[str] = Field(default_factory=list, description="PTX instructions the section defines")


class CollectionReport(_Frozen):
    source: str
    version: str
    collection: str
    action: Literal["built", "unchanged", "rebuilt", "removed"]
    reason: str = ""
    sections: int = 0
    chunks: int = 0
    embed_s: float = 0.0
    wall_s: float = 0.0


class IndexReport(_Frozen):
    home: str
    model: str
    collections: tuple[CollectionReport, ...]
    skipped: tuple[str, ...] = Field((), description="sources not indexed, each with the reason")
    wall_s: float = 0.0

    @property
    def changed(self) -> bool:
        return any(c.action != "unchanged" for c in self.collections)


class SectionChange(_Frozen):
    number: str
    title: str
    kind: Literal["added", "removed", "changed", "renumbered"]
    detail: str = ""


class ManualDiff(_Frozen):
    """What changed between two versions of a manual."""

    old_version: str
    new_version: str
    sections_added: tuple[SectionChange, ...] = ()
    sections_removed: tuple[SectionChange, ...] = ()
    sections_changed: tuple[SectionChange, ...] = ()
    instructions_added: tuple[str, ...] = ()
    instructions_removed: tuple[str, ...] = ()
    architectures_added: tuple[str, ...] = ()
