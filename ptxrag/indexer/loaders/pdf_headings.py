"""Where the sections of a PDF manual start: its outline's entries found on their pages, numbered lines
set in a heading face, a contents section's entries, or (last resort) numbered-line patterns."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..text import number_key
from .pdf_lines import Line

_NUMBER = r"(\d+(?:\.\d+)*)"
HEADING = re.compile(rf"^\s*(?:(?:Chapter|CHAPTER)\s+)?{_NUMBER}\.?(?:\s+(\S.*?))?\s*$")
BOOKMARK = re.compile(rf"^\s*(?:(?:Chapter|CHAPTER|Appendix)\s+)?{_NUMBER}\.?\s+(\S.*?)\s*$")
_CONTENTS = re.compile(
    rf"^\s*(?:(?:Chapter|CHAPTER)\s+)?{_NUMBER}\.?\s+(\S.*?)\s*(?:\.\s*){{3,}}\s*(\d+)\s*$"
)
_NUMBERED = re.compile(rf"^\s*{_NUMBER}\.\s+(\S.*?)\s*$")


@dataclass(frozen=True)
class Mark:
    """A numbered outline entry (bookmark)."""

    number: str
    title: str
    page: int | None
    """page index, None when the destination is not in the document"""


def _join(head: str, tail: str) -> str:
    """A line and the one it wraps onto; a line broken right after a hyphen or a slash that ends a word
    ("Multiply-", "K=64/") joins without a space, a free-standing one ("wait_group /") with one."""
    head, tail = head.rstrip(), tail.strip()
    glued = re.search(r"\S[-/]$", head) is not None
    return f"{head}{tail}" if glued else f"{head} {tail}".strip()


def body_size(stream: list[Line]) -> float:
    """The font size most of the running text is set in."""
    sizes: Counter[float] = Counter()
    for ln in stream:
        if not ln.mono:
            sizes[round(ln.size_pt, 1)] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def is_heading_face(ln: Line, body: float) -> bool:
    return not ln.mono and (ln.size_pt >= body * 1.12 or ln.bold)


def read_contents(stream: list[Line]) -> tuple[list[tuple[str, str, int]], set[int]]:
    """Contents entries (number, title, printed page) and the stream positions of contents lines."""
    entries: list[tuple[str, str, int]] = []
    where: set[int] = set()
    for i, ln in enumerate(stream):
        text = ln.text
        m = _CONTENTS.match(text)
        span = [i]
        if not m and BOOKMARK.match(text):
            # a long entry wraps: the page number is on its last line
            for j in range(i + 1, min(i + 3, len(stream))):
                if BOOKMARK.match(stream[j].text) or stream[j].page != ln.page:
                    break
                text = _join(text, stream[j].text)
                span.append(j)
                m = _CONTENTS.match(text)
                if m:
                    break
        if m:
            entries.append((m.group(1), re.sub(r"\s+", " ", m.group(2)).rstrip(" ."), int(m.group(3))))
            where.update(span)
    return entries, where


@dataclass
class Head:
    number: str
    title: str
    start: int
    """stream index of the heading's first line"""
    body: int
    """stream index of the first line after the heading (and its wrapped title)"""
    page: int


def _title_lines(stream: list[Line], i: int, body: float, known: str | None) -> tuple[str, int]:
    """The title after the heading line ``i`` (chapter titles sit on their own line; long titles wrap)
    and the index of the first body line."""
    m = HEADING.match(stream[i].text)
    title = (m.group(2) or "") if m else ""
    j = i + 1
    face = stream[i]
    while j < len(stream) and j <= i + 3:
        nxt = stream[j]
        if nxt.page != face.page or not is_heading_face(nxt, body) or HEADING.match(nxt.text):
            break
        if known is not None and not _norm_title(known).startswith(_norm_title(f"{title} {nxt.text}")):
            break
        if known is None and title and abs(nxt.size_pt - face.size_pt) > 0.5:
            break
        title = _join(title, nxt.text)
        j += 1
    return title, j


def _norm_title(s: str) -> str:
    return re.sub(r"[\s\-]+", "", s).lower()


def _find_heading(stream: list[Line], lo: int, mark: Mark, body: float) -> Head | None:
    """The heading line of an outline entry: on its page (or the next), starting with its number."""
    assert mark.page is not None
    best: int | None = None
    for i in range(lo, len(stream)):
        ln = stream[i]
        if ln.page < mark.page:
            continue
        if ln.page > mark.page + 1:
            break
        m = HEADING.match(ln.text)
        if m and m.group(1) == mark.number and not ln.mono:
            if is_heading_face(ln, body):
                best = i
                break
            if best is None:
                best = i
    if best is None:
        return None
    _, j = _title_lines(stream, best, body, mark.title)
    return Head(mark.number, mark.title, best, j, stream[best].page)


def heads_from_outline(stream: list[Line], marks: list[Mark], body: float) -> tuple[list[Head], list[str]]:
    heads: list[Head] = []
    missing: list[str] = []
    lo = 0
    for mark in marks:
        if mark.page is None:
            continue
        h = _find_heading(stream, lo, mark, body)
        if h is None:
            # heading not recognisable: the section starts at the top of its page
            start = next((i for i in range(lo, len(stream)) if stream[i].page >= mark.page), len(stream))
            h = Head(mark.number, mark.title, start, start, mark.page)
            missing.append(mark.number)
        heads.append(h)
        lo = h.body
    return heads, missing


def heads_between(stream: list[Line], heads: list[Head], body: float) -> list[Head]:
    """Numbered headings the outline leaves out (an outline often stops a level or two short): lines in a
    heading face inside a section whose numbers fall between that section's and the next one's."""
    found: list[Head] = []
    for k, h in enumerate(heads):
        end = heads[k + 1].start if k + 1 < len(heads) else len(stream)
        upper = number_key(heads[k + 1].number) if k + 1 < len(heads) else None
        prev = number_key(h.number)
        i = h.body
        while i < end:
            ln = stream[i]
            m = HEADING.match(ln.text)
            key = number_key(m.group(1)) if m else ()
            if m and is_heading_face(ln, body) and key > prev and (upper is None or key < upper):
                title, j = _title_lines(stream, i, body, None)
                if title:
                    found.append(Head(m.group(1), re.sub(r"\s+", " ", title), i, min(j, end), ln.page))
                    prev, i = key, j
                    continue
            i += 1
    return found


def heads_from_faces(stream: list[Line], body: float, expected: set[str]) -> list[Head]:
    """Numbered lines in a heading face, numbers increasing; only expected numbers when a contents
    section lists them."""
    heads: list[Head] = []
    prev: tuple[int, ...] | None = None
    i = 0
    while i < len(stream):
        ln = stream[i]
        m = HEADING.match(ln.text)
        if m and is_heading_face(ln, body):
            key = number_key(m.group(1))
            # a number the contents does not list counts only where it can follow the previous heading
            listed = not expected or m.group(1) in expected or _follows(prev, key)
            if listed and (prev is None or key > prev):
                title, j = _title_lines(stream, i, body, None)
                if title:
                    heads.append(Head(m.group(1), re.sub(r"\s+", " ", title), i, j, ln.page))
                    prev = key
                    i = j
                    continue
        i += 1
    return heads


def _follows(prev: tuple[int, ...] | None, cand: tuple[int, ...], gap: int = 3) -> bool:
    """Can section ``cand`` come right after ``prev``? First child, or a next sibling of ``prev`` or of an
    ancestor, allowing ``gap - 1`` headings lost by text extraction."""
    if prev is None:
        return cand in {(1,), (1, 1)}
    if cand == (*prev, 1):
        return True
    return any(cand == (*prev[:i], prev[i] + d) for i in range(len(prev)) for d in range(1, gap + 1))


def heads_from_patterns(stream: list[Line]) -> list[Head]:
    """Last resort, a PDF whose headings look like its body: ``N.N. Title`` lines whose number can follow
    the previous heading's."""
    heads: list[Head] = []
    prev: tuple[int, ...] | None = None
    for i, ln in enumerate(stream):
        m = _NUMBERED.match(ln.text)
        if m and not ln.mono:
            num = tuple(int(x) for x in m.group(1).split("."))
            if _follows(prev, num):
                heads.append(Head(m.group(1), m.group(2), i, i + 1, ln.page))
                prev = num
    return heads
