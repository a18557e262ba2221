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
    summary_chunk: bool = Field(
        True, description="add one chunk per section holding only its summary (see ``summary``)"
    )
    summary_chars: int = Field(400, ge=100, description="size of a section's summary")


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


_LABELS = frozenset(
    ["syntax", "description", "semantics", "notes", "ptx isa notes", "target isa notes", "examples"]
)


def summary(section: Section, max_chars: int = 400) -> str:
    """What a section is about, in a few sentences: for an instruction reference its one-line purpose
    ("Population count.") and the start of its Description; for other sections the start of their prose.
    Code blocks, tables and the repeated instruction-name line are left out. A short query describing a
    concept matches this much better than the long reference text (BM25 length normalisation, and a
    MiniLM vector of a whole chunk of syntax)."""
    prose: list[str] = []
    names = {n.lower() for n in section.defines} | {short_title(section.title).lower()}
    after_description = False
    head: list[str] = []
    for b in blocks(section.text):
        if b.startswith(("```", "~~~", "|")):
            continue
        low = b.strip().rstrip(":").lower()
        if low in _LABELS:
            after_description = low == "description"
            if low == "syntax" and head:
                prose = head[:]
            continue
        if low in names or low.replace(" ", "") in {n.replace(" ", "") for n in names}:
            continue
        if after_description or not section.defines:
            prose.append(b)
        elif not prose:
            head.append(b)
        if sum(len(x) for x in prose) >= max_chars:
            break
    text = " ".join(prose or head).replace("\n", " ")
    text = re.sub(r"\s+", " ", text).strip()
    return text[:max_chars].rsplit(" ", 1)[0] if len(text) > max_chars else text


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
        gist = summary(s, params.summary_chars) if params.summary_chunk else ""
        if gist and (len(bodies) > 1 or len(gist) + 40 < len(bodies[0])):
            body = f"{short_title(s.title)}: {gist}"
            out.append(
                Chunk(
                    chunk_id=chunk_id(source, version, s.number, len(bodies), body),
                    source=source,
                    version=version,
                    section_number=s.number,
                    title=s.title,
                    breadcrumb=breadcrumb(s, by_number),
                    url=s.url,
                    ordinal=len(bodies),
                    text=f"{crumb}\n\n{body}",
                    instructions=s.defines,
                )
            )
    return out
