"""PDF pages as lines that know their position and face (pypdf's text visitor), and the removal of running
headers and footers by where they sit and what repeats there, never by what a line says alone (so a
"Syntax" label on many pages stays)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_MONO = re.compile(r"mono|courier|consol|menlo|typewriter|code|cmtt|sftt|inconsolata|fixed", re.I)
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.I)
_ROMAN = re.compile(r"^[ivxlc]+$", re.I)


@dataclass(frozen=True)
class Line:
    """One text line of a page as pypdf extracts it."""

    page: int
    """page index, from 0"""
    y_pt: float
    """baseline height above the page's bottom edge"""
    x_pt: float
    """left edge of the first visible text"""
    text: str
    parts: tuple[str, ...]
    """the visible text runs the line is made of (one per font change or positioned run)"""
    parts_x_pt: tuple[float, ...]
    """where each run starts"""
    size_pt: float
    """largest font size on the line"""
    mono: bool
    """every visible run is in a monospace face"""
    bold: bool
    """every visible run is in a bold face"""


def _font_kind(font: Any, cache: dict[int, tuple[bool, bool]]) -> tuple[bool, bool]:
    """(monospace, bold) of a font dictionary, from its name and its descriptor's FixedPitch flag."""
    if font is None:
        return False, False
    key = id(font)
    if key in cache:
        return cache[key]
    try:
        name = str(font.get("/BaseFont", ""))
        desc = font.get("/FontDescriptor")
        if desc is None and "/DescendantFonts" in font:
            desc = font["/DescendantFonts"][0].get_object().get("/FontDescriptor")
        flags = int(desc.get_object().get("/Flags", 0)) if desc is not None else 0
        weight = float(desc.get_object().get("/FontWeight", 0)) if desc is not None else 0.0
    except Exception:  # noqa: BLE001 - a damaged font dictionary: judge by nothing
        name, flags, weight = "", 0, 0.0
    kind = (bool(_MONO.search(name)) or bool(flags & 1), bool(_BOLD.search(name)) or weight >= 600)
    cache[key] = kind
    return kind


def page_lines(page: Any, index: int, cache: dict[int, tuple[bool, bool]]) -> tuple[str, list[Line]]:
    """The page's plain text (as ``extract_text``) and its lines with position and face."""
    runs: list[tuple[str, float, float, float, bool, bool]] = []

    def visit(text: str, cm: Sequence[float], tm: Sequence[float], font: Any, size: float) -> None:
        a = tm[0] * cm[0] + tm[1] * cm[2]
        b = tm[0] * cm[1] + tm[1] * cm[3]
        c = tm[2] * cm[0] + tm[3] * cm[2]
        d = tm[2] * cm[1] + tm[3] * cm[3]
        x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(a * d - b * c) ** 0.5 or 1.0
        mono, bold = _font_kind(font, cache)
        runs.append((text, x, y, float(size or 0) * scale, mono, bold))

    text = page.extract_text(visitor_text=visit)
    lines: list[Line] = []
    cur: list[tuple[str, float, float, float, bool, bool]] = []
    texts: list[str] = [""]

    def close() -> None:
        vis = [r for r in cur if r[0].strip()]
        if vis:
            lines.append(
                Line(
                    page=index,
                    y_pt=vis[0][2],
                    x_pt=vis[0][1],
                    text=texts[0].rstrip(),
                    parts=tuple(r[0].strip() for r in vis),
                    parts_x_pt=tuple(r[1] + _lead(r[0], r[3]) for r in vis),
                    size_pt=max(r[3] for r in vis),
                    mono=all(r[4] for r in vis),
                    bold=all(r[5] for r in vis),
                )
            )
        cur.clear()
        texts[0] = ""

    for run in runs:
        pieces = run[0].split("\n")
        for k, piece in enumerate(pieces):
            if k:
                close()
            if piece:
                cur.append((piece, *run[1:]))
                texts[0] += piece
    close()
    return text, lines


def _lead(text: str, size: float) -> float:
    """Width of a run's leading spaces (about a quarter em each)."""
    return (len(text) - len(text.lstrip())) * 0.25 * size


def _norm(s: str) -> str:
    s = re.sub(r"\d+", "#", s.strip())
    return "#" if _ROMAN.match(s) else s


def running_lines(pages: list[list[Line]]) -> set[tuple[int, int]]:
    """(page, line index) of running headers and footers: lines at the top or bottom edge of their page,
    at a height shared by at least half the pages, whose text (a run of it, or its first or last 12
    characters, digits ignored) repeats at that edge on at least a quarter of the pages, and that are
    not set larger than the body (a "Chapter 3." heading at the top of many pages stays)."""
    n = len(pages)
    if n < 3:
        return set()
    found: set[tuple[int, int]] = set()
    need = max(3, int(0.25 * n))
    sizes: Counter[float] = Counter()
    for lines in pages:
        for ln in lines:
            sizes[round(ln.size_pt, 1)] += len(ln.text)
    big = 1.12 * sizes.most_common(1)[0][0]  # headers are never set larger than the body; headings are
    for top in (True, False):
        done: set[tuple[int, int]] = set()
        for _ in range(3):  # a header of up to three rows
            edges: list[tuple[int, int, float]] = []
            for p, lines in enumerate(pages):
                rest = [(i, ln) for i, ln in enumerate(lines) if (p, i) not in done]
                if not rest:
                    continue
                edge_y = (max if top else min)(ln.y_pt for _, ln in rest)
                edges.extend((p, i, ln.y_pt) for i, ln in rest if abs(ln.y_pt - edge_y) <= 1.5)
            heights = Counter(round(y) for _, _, y in edges)
            if not heights:
                break
            y0, count = heights.most_common(1)[0]
            if len({p for p, _, y in edges if abs(y - y0) <= 1.5}) < max(3, n // 2):
                break
            at = [(p, i) for p, i, y in edges if abs(y - y0) <= 1.5]
            keys: Counter[str] = Counter()
            for p, i in at:
                ln = pages[p][i]
                t = _norm(ln.text)
                keys.update({*(f"part:{_norm(x)}" for x in ln.parts), f"head:{t[:12]}", f"tail:{t[-12:]}"})
            repeated = {k for k, c in keys.items() if c >= need}
            hit = False
            for p, i in at:
                ln = pages[p][i]
                t = _norm(ln.text)
                mine = {*(f"part:{_norm(x)}" for x in ln.parts), f"head:{t[:12]}", f"tail:{t[-12:]}"}
                if mine & repeated and ln.size_pt < big:
                    found.add((p, i))
                    hit = True
                done.add((p, i))
            if not hit:
                break
    return found


def _columns(lines: Sequence[Line]) -> list[float]:
    """Left edges (2 pt apart or more) where a run starts in at least a quarter of ``lines`` (cells
    spanning rows leave some columns empty)."""
    starts = sorted(x for ln in lines for x in {round(v) for v in ln.parts_x_pt})
    clusters: list[list[float]] = []
    for x in starts:
        if clusters and x - clusters[-1][-1] <= 2:
            clusters[-1].append(x)
        else:
            clusters.append([x])
    cols = []
    for c in clusters:
        rows = sum(1 for ln in lines if any(abs(v - c[0]) <= 2 + (c[-1] - c[0]) for v in ln.parts_x_pt))
        if rows >= max(2, len(lines) / 4):
            cols.append(min(c))
    return cols


def table(lines: Sequence[Line], i: int) -> tuple[list[list[str]], int] | None:
    """A table starting at ``lines[i]``: rows of cells and the index after it, or None. A table is a run of
    lines made of several text runs whose left edges line up in two or more columns; a line whose runs
    all sit right of the first column continues the cells of the row above (a wrapped cell)."""
    first = lines[i]
    if first.mono or len(first.parts) < 2:
        return None
    j = i
    while j < len(lines) and not lines[j].mono and (j == i or lines[j].page - lines[j - 1].page <= 1):
        ln = lines[j]
        # a one-cell row goes on the table only when a row of several cells follows it
        more = j + 1 < len(lines) and len(lines[j + 1].parts) >= 2 and not lines[j + 1].mono
        if len(ln.parts) < 2 and (j == i or ln.x_pt <= first.x_pt + 2) and not more:
            break
        j += 1
    multi = [ln for ln in lines[i:j] if len(ln.parts) >= 2]
    if len(multi) < 2:
        return None
    cols = _columns(multi)
    if len(cols) < 2 or abs(cols[0] - first.x_pt) > 2:
        return None

    slack = 0.5 * first.size_pt  # a run's left edge is known to about a space

    def col_of(x: float) -> int:
        return max([k for k, c in enumerate(cols) if c <= x + slack] or [0])

    rows: list[list[str]] = []
    for ln in lines[i:j]:
        cells = [""] * len(cols)
        for text, x in zip(ln.parts, ln.parts_x_pt, strict=True):
            k = col_of(x)
            cells[k] = f"{cells[k]} {text}".strip()
        if rows and ln.x_pt > cols[0] + slack:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return (rows, j) if len(rows) >= 2 else None
