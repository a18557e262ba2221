"""The PDF manual (pypdf).

Section boundaries come from the PDF outline (bookmarks) when it has one: each numbered bookmark gives the
title and the page; the heading is then found on that page by its number. Without an outline, headings are
found in the text by pattern (``9.7.13.15.16. Title`` at the start of a line), and a candidate counts only
if its number can follow the previous one (first child, or next sibling of it or of an ancestor): numbered
list items and table-of-contents lines do not. Running headers and footers (lines on most pages) are
dropped."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import ManualFormatError
from ..text import collapse_blank_lines
from .tree import RawSection

_NUMBERED = re.compile(r"^\s*(\d+(?:\.\d+)*)\.\s+(\S.*?)\s*$")
_TOC_LINE = re.compile(r"(\.\s*){4,}\s*\d+\s*$|\s\d+\s*$")


def _read(path: Path) -> Any:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PdfStreamError

    try:
        reader = PdfReader(str(path), strict=False)
        _ = len(reader.pages)
        return reader
    except (PdfReadError, PdfStreamError, ValueError, KeyError, OSError, TypeError) as e:
        raise ManualFormatError(f"{path}: not a readable PDF (truncated or damaged?): {e}") from e


def _page_texts(reader: Any, path: Path) -> list[str]:
    texts = []
    for i, page in enumerate(reader.pages):
        try:
            texts.append(page.extract_text() or "")
        except Exception as e:  # pypdf raises many kinds on damaged content streams
            raise ManualFormatError(
                f"{path}: page {i + 1} cannot be read ({e}); truncated or damaged PDF?"
            ) from e
    if not any(t.strip() for t in texts):
        raise ManualFormatError(f"{path}: the PDF has no extractable text (a scan?)")
    return texts


def _drop_running_lines(pages: list[str]) -> list[str]:
    """Remove lines that recur on at least 40% of pages (headers, footers), digits ignored."""
    if len(pages) < 3:
        return pages
    seen: Counter[str] = Counter()
    for text in pages:
        seen.update({re.sub(r"\d+", "#", ln.strip()) for ln in text.splitlines() if ln.strip()})
    running = {k for k, n in seen.items() if n >= max(3, 0.4 * len(pages))}
    return [
        "\n".join(ln for ln in text.splitlines() if re.sub(r"\d+", "#", ln.strip()) not in running)
        for text in pages
    ]


def _outline(reader: Any) -> list[tuple[str, str, int]]:
    """(number, title, page index) of every numbered bookmark, in outline order."""
    out: list[tuple[str, str, int]] = []

    def visit(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                visit(item)
                continue
            title = str(getattr(item, "title", "") or "").strip()
            m = _NUMBERED.match(title)
            if not m:
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - a broken destination: skip that bookmark
                continue
            if page is not None and page >= 0:
                out.append((m.group(1), m.group(2), page))

    try:
        visit(reader.outline)
    except Exception:  # noqa: BLE001 - a damaged outline: fall back to text patterns
        return []
    return out


def _follows(prev: tuple[int, ...] | None, cand: tuple[int, ...], gap: int = 3) -> bool:
    """Can section ``cand`` come right after ``prev``? First child, or a next sibling of ``prev`` or of an
    ancestor, allowing ``gap - 1`` headings lost by text extraction."""
    if prev is None:
        return cand in {(1,), (1, 1)}
    if cand == (*prev, 1):
        return True
    return any(cand == (*prev[:i], prev[i] + d) for i in range(len(prev)) for d in range(1, gap + 1))


def _from_outline(pages: list[str], marks: list[tuple[str, str, int]], where: str) -> list[RawSection]:
    offsets = []
    pos = 0
    for text in pages:
        offsets.append(pos)
        pos += len(text) + 1
    full = "\n".join(pages)
    starts: list[tuple[int, int]] = []  # (heading start, body start)
    cursor = 0
    for number, _title, page in marks:
        lo = max(cursor, offsets[min(page, len(offsets) - 1)])
        m = re.compile(rf"(?m)^\s*{re.escape(number)}\.?\s").search(full, lo)
        if m is not None and (
            page + 1 >= len(offsets) or m.start() < offsets[min(page + 2, len(offsets) - 1)]
        ):
            line_end = full.find("\n", m.start())
            starts.append((m.start(), len(full) if line_end < 0 else line_end + 1))
            cursor = m.end()
        else:
            starts.append((lo, lo))
            cursor = lo
    pieces = []
    for i, (number, title, page) in enumerate(marks):
        end = starts[i + 1][0] if i + 1 < len(marks) else len(full)
        body = full[starts[i][1] : max(end, starts[i][1])]
        pieces.append(
            RawSection(
                number=number,
                title=re.sub(r"\s+", " ", title),
                anchor=None,
                url=None,
                body=collapse_blank_lines(body),
                where=f"{where} p.{page + 1}",
                primary=True,
            )
        )
    return pieces


def _from_text(pages: list[str], where: str) -> list[RawSection]:
    pieces: list[RawSection] = []
    prev: tuple[int, ...] | None = None
    current: dict | None = None
    body: list[str] = []
    for p, text in enumerate(pages):
        for line in text.splitlines():
            m = _NUMBERED.match(line)
            if m and not _TOC_LINE.search(line):
                num = tuple(int(x) for x in m.group(1).split("."))
                if _follows(prev, num):
                    if current is not None:
                        pieces.append(RawSection(body=collapse_blank_lines("\n".join(body)), **current))
                    current = {
                        "number": m.group(1),
                        "title": m.group(2),
                        "anchor": None,
                        "url": None,
                        "where": f"{where} p.{p + 1}",
                        "primary": True,
                    }
                    body, prev = [], num
                    continue
            if current is not None:
                body.append(line)
    if current is not None:
        pieces.append(RawSection(body=collapse_blank_lines("\n".join(body)), **current))
    return pieces


def load_pdf(path: Path, *, base_url: str | None = None) -> list[RawSection]:
    """Sections of a PDF manual. PDF sections carry no anchors, so no URLs (``base_url`` is unused)."""
    reader = _read(path)
    pages = _drop_running_lines(_page_texts(reader, path))
    marks = _outline(reader)
    pieces = _from_outline(pages, marks, path.name) if marks else _from_text(pages, path.name)
    if not pieces:
        raise ManualFormatError(
            f"{path}: no numbered sections found (no numbered bookmarks, and no headings like "
            "'1. Introduction' in the text)"
        )
    return pieces
