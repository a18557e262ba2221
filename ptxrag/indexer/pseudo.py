"""Pseudo-queries generated from a manual itself, for training retrieval parts offline (no hand-written
query, so nothing of an evaluation set leaks in).

Each pseudo-query is a piece of a section's own text rewritten the way an agent asks without knowing the
name: the instruction's one-line purpose and the sentences of its Description with every name the section
defines replaced by "this instruction", the first sentences of a concept section's prose, a section's short
title, and the lines of a release note ("Adds support for ... instruction") for the release-note section.
``source_text`` is the text the query came from, so a trainer can hide the chunk that contains it (the
query should pull the section's *other* text, as a real paraphrase would)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .chunking import blocks, short_title
from .schema import Section

#: labels of an instruction reference that end its purpose / start its Description
_LABELS = frozenset(
    ["syntax", "description", "semantics", "notes", "ptx isa notes", "target isa notes", "examples"]
)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])[.!?]\s+(?=[A-Z])")
_MARKUP = re.compile(r"[*`]+")
_RELEASE = re.compile(r"^Changes in PTX ISA Version", re.I)
MIN_WORDS = 4
MAX_WORDS = 40


@dataclass(frozen=True)
class PseudoQuery:
    query: str
    section: str
    """the section number it should find"""
    kind: str
    """purpose, description, prose, title or release"""
    source_text: str
    """the text of the section it was cut from (whitespace-normalised)"""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", _MARKUP.sub("", text)).strip()


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(_norm(paragraph)) if s.strip()]


def mask_names(text: str, names: Sequence[str]) -> str:
    """``text`` with each defined name (and its dotted variants, ``cp.async.bulk.tensor.2d``) replaced by
    "this instruction": a pseudo-query must describe, not name."""
    out = text
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        out = re.sub(
            rf"(?<![\w.%]){re.escape(name)}(?:\.[\w:]+)*(?![\w])", "this instruction", out, flags=re.I
        )
    out = re.sub(r"(?:this instruction[ ,/and]*){2,}", "this instruction ", out)
    return re.sub(r"\s+", " ", out).strip()


def _ok(words: int) -> bool:
    return MIN_WORDS <= words <= MAX_WORDS


def _instruction_queries(section: Section, all_sentences: bool) -> Iterator[PseudoQuery]:
    names = list(section.defines) + [short_title(section.title)]
    low_names = {n.lower().replace(" ", "") for n in names}
    label = None
    for b in blocks(section.text):
        if b.startswith(("```", "~~~", "|")):
            continue
        low = b.strip().rstrip(":").lower()
        if low in _LABELS:
            label = low
            continue
        if low.replace(" ", "").replace(",", "/") in low_names or low.replace(" ", "") in low_names:
            continue
        if label is None or label == "description":
            kind = "purpose" if label is None else "description"
            for sent in _sentences(b):
                q = mask_names(sent, names)
                if _ok(len(q.split())) and q.lower() != "this instruction":
                    yield PseudoQuery(q, section.number, kind, _norm(sent))
                if kind == "description" and not all_sentences:
                    break  # the first sentence of each paragraph says most


def _prose_queries(section: Section) -> Iterator[PseudoQuery]:
    title = short_title(section.title)
    if _ok(len(title.split()) + 2) and not title[:1].isdigit():
        yield PseudoQuery(title, section.number, "title", _norm(title))
    taken = 0
    for b in blocks(section.text):
        if b.startswith(("```", "~~~", "|", "*", "-")) or taken >= 3:
            continue
        for sent in _sentences(b)[:1]:
            if _ok(len(sent.split())):
                yield PseudoQuery(sent, section.number, "prose", sent)
                taken += 1


def _release_queries(section: Section) -> Iterator[PseudoQuery]:
    items: list[str] = []
    for line in section.text.splitlines():
        if line.startswith(("* ", "- ")):
            items.append(line[2:])
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()  # a wrapped bullet
    for item in items:
        text = _norm(item)
        if _ok(len(text.split())):
            query = f"which PTX ISA version {text[0].lower()}{text[1:]}"
            yield PseudoQuery(query, section.number, "release", text)


def pseudo_queries(sections: Sequence[Section], *, all_sentences: bool = False) -> list[PseudoQuery]:
    """Every pseudo-query of a manual, in section order, duplicates (same query text) dropped; a
    Description gives the first sentence of each paragraph, or with ``all_sentences`` every one."""
    out: list[PseudoQuery] = []
    seen: set[str] = set()
    for s in sections:
        if _RELEASE.match(s.title):
            gen: Iterator[PseudoQuery] = _release_queries(s)
        elif s.defines:
            gen = _instruction_queries(s, all_sentences)
        else:
            gen = _prose_queries(s)
        for q in gen:
            key = q.query.lower()
            if key not in seen:
                seen.add(key)
                out.append(q)
    return out


def holdout(query: str, share: float = 0.15) -> bool:
    """A stable share of pseudo-queries kept out of training (to stop it), by a hash of the text."""
    return int(hashlib.sha256(query.encode()).hexdigest()[:8], 16) % 1000 < share * 1000
