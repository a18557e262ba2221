"""Sections to chunks that fit the embedding window: paragraphs packed up to ``max_chars``, code blocks and
tables never split, and every chunk opening with its breadcrumb so it stands on its own."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping

from pydantic import BaseModel, ConfigDict, Field

from .schema import Chunk, Section

_INSTR_PREFIX = re.compile(r"^.*?\b(?:Instructions?|Directives|Special Registers)\s*:\s*", re.IGNORECASE)


class ChunkingParams(BaseModel):
    """Recorded in the index manifest: changing any of these rebuilds the index."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_chars: int = Field(
        900, ge=200, description="target chunk body size; a code block or table may exceed it"
    )
    min_chars: int = Field(
        200, ge=0, description="a trailing piece shorter than this joins the previous chunk"
    )
    breadcrumb_levels: int = Field(3, ge=1, description="ancestors named in each chunk's header line")


def short_title(title: str) -> str:
    """ "Parallel Synchronization and Communication Instructions: mbarrier.init" -> "mbarrier.init"."""
    short = _INSTR_PREFIX.sub("", title)
    return short or title


def breadcrumb(section: Section, by_number: Mapping[str, Section], levels: int | None = None) -> str:
    """ "9.7.13 Parallel Synchronization ... > 9.7.13.15 mbarrier > 9.7.13.15.16 mbarrier.test_wait / ..." """
    chain = [by_number[p] for p in section.parents if p in by_number] + [section]
    if levels is not None:
        chain = chain[-levels:]
    return " > ".join(f"{s.number} {short_title(s.title)}" for s in chain)


def blocks(text: str) -> Iterator[str]:
    """Paragraphs, list items, whole ``` code blocks and whole | tables |, in order."""
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> Iterator[str]:
        if para and "".join(para).strip():
            yield "\n".join(para).strip()
        para.clear()

    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            yield from flush()
            fence = [line]
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(("```", "~~~")):
                fence.append(lines[i])
                i += 1
            if i < len(lines):
                fence.append(lines[i])
            i += 1
            yield "\n".join(fence)
            continue
        if line.lstrip().startswith("|"):
            yield from flush()
            table = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                table.append(lines[i])
                i += 1
            yield "\n".join(table)
            continue
        if not line.strip():
            yield from flush()
        else:
            para.append(line)
        i += 1
    yield from flush()


def _split_long(block: str, max_chars: int) -> list[str]:
    """A prose block longer than ``max_chars`` split at sentence ends (code and tables stay whole)."""
    if len(block) <= max_chars or block.startswith(("```", "~~~", "|")):
        return [block]
    sentences = re.split(r"(?<=[.;:])\s+(?=[A-Z*`(])", block)
    out: list[str] = []
    cur = ""
    for s in sentences:
        if cur and len(cur) + 1 + len(s) > max_chars:
            out.append(cur)
            cur = s
        else:
            cur = f"{cur} {s}" if cur else s
    if cur:
        out.append(cur)
    return out


def pack(text: str, params: ChunkingParams) -> list[str]:
    """Chunk bodies of one section's text."""
    pieces: list[str] = []
    for b in blocks(text):
        pieces.extend(_split_long(b, params.max_chars))
    bodies: list[str] = []
    cur: list[str] = []
    size = 0
    for p in pieces:
        if cur and size + len(p) > params.max_chars:
            bodies.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(p)
        size += len(p) + 2
    if cur:
        tail = "\n\n".join(cur)
        if bodies and len(tail) < params.min_chars:
            bodies[-1] = f"{bodies[-1]}\n\n{tail}"
        else:
            bodies.append(tail)
    return bodies


def chunk_id(source: str, version: str, number: str, ordinal: int, body: str) -> str:
    digest = hashlib.sha1(body.encode("utf-8")).hexdigest()[:10]
    return f"{source}:{version}:{number}:{ordinal}:{digest}"


def chunk_sections(
    sections: Iterable[Section], *, source: str, version: str, params: ChunkingParams
) -> list[Chunk]:
    """All chunks of a manual. A section with no text of its own still yields one chunk (its heading), so
    every section can be found by its title."""
    secs = list(sections)
    by_number = {s.number: s for s in secs}
    out: list[Chunk] = []
    for s in secs:
        crumb = breadcrumb(s, by_number, params.breadcrumb_levels)
        bodies = pack(s.text, params) or [""]
        for i, body in enumerate(bodies):
            text = f"{crumb}\n\n{body}".strip()
            out.append(
                Chunk(
                    chunk_id=chunk_id(source, version, s.number, i, body),
                    source=source,
                    version=version,
                    section_number=s.number,
                    title=s.title,
                    breadcrumb=breadcrumb(s, by_number),
                    url=s.url,
                    ordinal=i,
                    text=text,
                    instructions=s.defines,
                )
            )
    return out
