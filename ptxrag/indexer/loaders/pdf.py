"""The PDF manual (pypdf), read so that what it yields can be trusted or is refused.

Text comes as lines that know their page, height and face (``pdf_lines``). Running headers and footers
are the lines at a page edge whose text repeats there; labels such as "Syntax" stay. Section boundaries
come from the outline (bookmarks) when the PDF has one: each numbered bookmark gives number, title and
page, and its heading is the line on that page that starts with the number ("Chapter 9." for chapters).
Without an outline, headings are the numbered lines set larger or bolder than the body ("9.7.1.1. add",
"9.7.1.1 add", "Chapter 9." followed by the title), in increasing number order; a contents section, when
there is one, says which numbers to expect. Runs of monospace lines become ``` code blocks, indented by
their position on the page.

Refused (``ManualFormatError``, exit 2), with what was found: outline entries or contents lines pointing
past the last page (pages cut off), a text that ends before the manual's closing chapters (Release
Notes, Notices) when nothing else vouches for the PDF being whole, and a PDF whose structure could not
be recovered (no outline and no numbered headings: a few sections holding most of the text). What was
recovered is in :class:`PdfLoadReport`; its warnings also go out as :class:`ManualLoadWarning`."""

from __future__ import annotations

import re
import statistics
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ManualFormatError
from ..instructions import names_in_title
from ..text import collapse_blank_lines, number_key
from .pdf_lines import Line, page_lines, running_lines, table
from .tree import RawSection

_NUMBER = r"(\d+(?:\.\d+)*)"
_HEADING = re.compile(rf"^\s*(?:(?:Chapter|CHAPTER)\s+)?{_NUMBER}\.?(?:\s+(\S.*?))?\s*$")
_BOOKMARK = re.compile(rf"^\s*(?:(?:Chapter|CHAPTER|Appendix)\s+)?{_NUMBER}\.?\s+(\S.*?)\s*$")
_CONTENTS = re.compile(
    rf"^\s*(?:(?:Chapter|CHAPTER)\s+)?{_NUMBER}\.?\s+(\S.*?)\s*(?:\.\s*){{3,}}\s*(\d+)\s*$"
)
_NUMBERED = re.compile(rf"^\s*{_NUMBER}\.\s+(\S.*?)\s*$")
#: what a complete PTX ISA manual ends with: the Notices chapter (9.x), or the .pragma appendix and an
#: unnumbered Notice page (3.x)
_END_MATTER = re.compile(r"^\s*(notices?|appendix\b.*|.*pragma strings)\s*$", re.I)

#: no section of a real manual is this long (9.1's longest, cvt, has about 32,000 characters): a section
#: longer than this holds headings that were not recognised
_LONGEST_SECTION_CHARS = 80_000

Structure = Literal["outline", "headings", "text-patterns"]


class ManualLoadWarning(UserWarning):
    """Something a loader recovered only in part; the manual was still accepted."""


@dataclass(frozen=True)
class PdfLoadReport:
    """What the PDF loader recovered, for ``ptxrag corpus add`` / ``ptxrag index`` to show."""

    path: str
    pages: int
    structure: Structure
    """where the section boundaries came from: the outline, headings told by their face, or text
    patterns alone (the least reliable)"""
    sections: int
    instruction_sections: int
    """sections whose title names a PTX instruction (``...: cvt``)"""
    code_blocks: int
    running_lines_removed: int
    outline_entries: int = 0
    contents_entries: int = 0
    headings_beyond_outline: int = 0
    """numbered headings found in the text that the outline does not list (it stops short of them)"""
    headings_not_found: tuple[str, ...] = ()
    """numbers of outline or contents entries whose heading was not found in the text"""
    largest_section_chars: int = 0
    total_chars: int = 0
    warnings: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        return (
            f"{self.path}: {self.pages} pages, {self.sections} sections ({self.instruction_sections} "
            f"instruction sections) from the {self.structure}"
            + (
                f" ({self.headings_beyond_outline} below its deepest level)"
                if self.headings_beyond_outline
                else ""
            )
            + f", {self.code_blocks} code blocks, "
            f"{self.running_lines_removed} running header/footer lines removed"
            + (f"; {len(self.warnings)} warning(s)" if self.warnings else "")
        )


def _read(path: Path) -> Any:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PdfStreamError

    try:
        reader = PdfReader(str(path), strict=False)
        _ = len(reader.pages)
        return reader
    except (PdfReadError, PdfStreamError, ValueError, KeyError, OSError, TypeError) as e:
        raise ManualFormatError(f"{path}: not a readable PDF (truncated or damaged?): {e}") from e


def _lines(reader: Any, path: Path) -> list[list[Line]]:
    pages: list[list[Line]] = []
    cache: dict[int, tuple[bool, bool]] = {}
    for i, page in enumerate(reader.pages):
        try:
            _, lines = page_lines(page, i, cache)
        except Exception as e:  # pypdf raises many kinds on damaged content streams
            raise ManualFormatError(
                f"{path}: page {i + 1} cannot be read ({e}); truncated or damaged PDF?"
            ) from e
        pages.append(lines)
    if not any(pages):
        raise ManualFormatError(f"{path}: the PDF has no extractable text (a scan?)")
    return pages


@dataclass(frozen=True)
class _Mark:
    number: str
    title: str
    page: int | None
    """page index, None when the destination is not in the document"""


def _outline(reader: Any) -> list[_Mark]:
    """Every numbered bookmark, in outline order; unnumbered ones (Contents, Index) are skipped."""
    out: list[_Mark] = []

    def visit(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                visit(item)
                continue
            title = str(getattr(item, "title", "") or "").strip()
            m = _BOOKMARK.match(title)
            if not m:
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - a broken destination counts as pointing nowhere
                page = None
            ok = page is not None and 0 <= page < len(reader.pages)
            out.append(_Mark(m.group(1), re.sub(r"\s+", " ", m.group(2)), page if ok else None))

    try:
        visit(reader.outline)
    except Exception:  # noqa: BLE001 - a damaged outline: fall back to the headings
        return []
    return out


def _body_size(stream: list[Line]) -> float:
    sizes: Counter[float] = Counter()
    for ln in stream:
        if not ln.mono:
            sizes[round(ln.size_pt, 1)] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _is_heading_face(ln: Line, body: float) -> bool:
    return not ln.mono and (ln.size_pt >= body * 1.12 or ln.bold)


def _contents(stream: list[Line]) -> tuple[list[tuple[str, str, int]], set[int]]:
    """Contents entries (number, title, printed page) and the stream positions of contents lines."""
    entries: list[tuple[str, str, int]] = []
    where: set[int] = set()
    for i, ln in enumerate(stream):
        text = ln.text
        m = _CONTENTS.match(text)
        span = [i]
        if not m and _BOOKMARK.match(text):
            # a long entry wraps: the page number is on its last line
            for j in range(i + 1, min(i + 3, len(stream))):
                if _BOOKMARK.match(stream[j].text) or stream[j].page != ln.page:
                    break
                text = f"{text.rstrip()} {stream[j].text.strip()}"
                span.append(j)
                m = _CONTENTS.match(text)
                if m:
                    break
        if m:
            entries.append((m.group(1), re.sub(r"\s+", " ", m.group(2)).rstrip(" ."), int(m.group(3))))
            where.update(span)
    return entries, where


@dataclass
class _Head:
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
    m = _HEADING.match(stream[i].text)
    title = (m.group(2) or "") if m else ""
    j = i + 1
    face = stream[i]
    while j < len(stream) and j <= i + 3:
        nxt = stream[j]
        if nxt.page != face.page or not _is_heading_face(nxt, body) or _HEADING.match(nxt.text):
            break
        if known is not None and not _norm_title(known).startswith(_norm_title(f"{title} {nxt.text}")):
            break
        if known is None and title and abs(nxt.size_pt - face.size_pt) > 0.5:
            break
        # a title broken at a hyphen joins without a space ("Multiply-" + "Accumulate")
        title = f"{title}{nxt.text.strip()}" if title.endswith("-") else f"{title} {nxt.text.strip()}".strip()
        j += 1
    return title, j


def _norm_title(s: str) -> str:
    return re.sub(r"[\s\-]+", "", s).lower()


def _find_heading(stream: list[Line], lo: int, mark: _Mark, body: float) -> _Head | None:
    """The heading line of an outline entry: on its page (or the next), starting with its number."""
    assert mark.page is not None
    best: int | None = None
    for i in range(lo, len(stream)):
        ln = stream[i]
        if ln.page < mark.page:
            continue
        if ln.page > mark.page + 1:
            break
        m = _HEADING.match(ln.text)
        if m and m.group(1) == mark.number and not ln.mono:
            if _is_heading_face(ln, body):
                best = i
                break
            if best is None:
                best = i
    if best is None:
        return None
    _, j = _title_lines(stream, best, body, mark.title)
    return _Head(mark.number, mark.title, best, j, stream[best].page)


def _heads_from_outline(stream: list[Line], marks: list[_Mark], body: float) -> tuple[list[_Head], list[str]]:
    heads: list[_Head] = []
    missing: list[str] = []
    lo = 0
    for mark in marks:
        if mark.page is None:
            continue
        h = _find_heading(stream, lo, mark, body)
        if h is None:
            # heading not recognisable: the section starts at the top of its page
            start = next((i for i in range(lo, len(stream)) if stream[i].page >= mark.page), len(stream))
            h = _Head(mark.number, mark.title, start, start, mark.page)
            missing.append(mark.number)
        heads.append(h)
        lo = h.body
    return heads, missing


def _heads_between(stream: list[Line], heads: list[_Head], body: float) -> list[_Head]:
    """Numbered headings the outline leaves out (an outline often stops a level or two short): lines in a
    heading face inside a section whose numbers fall between that section's and the next one's."""
    found: list[_Head] = []
    for k, h in enumerate(heads):
        end = heads[k + 1].start if k + 1 < len(heads) else len(stream)
        upper = number_key(heads[k + 1].number) if k + 1 < len(heads) else None
        prev = number_key(h.number)
        i = h.body
        while i < end:
            ln = stream[i]
            m = _HEADING.match(ln.text)
            key = number_key(m.group(1)) if m else ()
            if m and _is_heading_face(ln, body) and key > prev and (upper is None or key < upper):
                title, j = _title_lines(stream, i, body, None)
                if title:
                    found.append(_Head(m.group(1), re.sub(r"\s+", " ", title), i, min(j, end), ln.page))
                    prev, i = key, j
                    continue
            i += 1
    return found


def _heads_from_faces(stream: list[Line], body: float, expected: set[str]) -> list[_Head]:
    """Numbered lines in a heading face, numbers increasing; only expected numbers when a contents
    section lists them."""
    heads: list[_Head] = []
    prev: tuple[int, ...] | None = None
    i = 0
    while i < len(stream):
        ln = stream[i]
        m = _HEADING.match(ln.text)
        if m and _is_heading_face(ln, body):
            key = number_key(m.group(1))
            # a number the contents does not list counts only where it can follow the previous heading
            listed = not expected or m.group(1) in expected or _follows(prev, key)
            if listed and (prev is None or key > prev):
                title, j = _title_lines(stream, i, body, None)
                if title:
                    heads.append(_Head(m.group(1), re.sub(r"\s+", " ", title), i, j, ln.page))
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


def _heads_from_patterns(stream: list[Line]) -> list[_Head]:
    """Last resort, a PDF whose headings look like its body: ``N.N. Title`` lines whose number can follow
    the previous heading's."""
    heads: list[_Head] = []
    prev: tuple[int, ...] | None = None
    for i, ln in enumerate(stream):
        m = _NUMBERED.match(ln.text)
        if m and not ln.mono:
            num = tuple(int(x) for x in m.group(1).split("."))
            if _follows(prev, num):
                heads.append(_Head(m.group(1), m.group(2), i, i + 1, ln.page))
                prev = num
    return heads


_BROKEN = re.compile(r"([A-Za-z]+)-$")
_REST = re.compile(r"^([a-z]+)(.*)$")


def _vocabulary(stream: list[Line]) -> set[str]:
    return {
        w.lower() for ln in stream if not ln.mono for w in re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)*", ln.text)
    }


def _join_hyphenated(prev: str, line: str, vocab: set[str] | frozenset[str]) -> tuple[str, str] | None:
    """``("execu-", "tion is ...")`` -> ``("execution", "is ...")`` when the document uses the whole
    word and not the hyphenated one (a line broken at a real hyphen, "compute-intensive", stays)."""
    a, b = _BROKEN.search(prev), _REST.match(line)
    if a is None or b is None:
        return None
    whole = (a.group(1) + b.group(1)).lower()
    if whole not in vocab or f"{a.group(1)}-{b.group(1)}".lower() in vocab:
        return None
    return prev[: a.start()] + a.group(1) + b.group(1), b.group(2).strip()


def _render(
    lines: list[Line], body: float, vocab: set[str] | frozenset[str] = frozenset()
) -> tuple[str, int]:
    """Body lines as text: paragraphs split where the line spacing opens up, words hyphenated at a line
    end joined (when ``vocab``, the document's words, has them whole), monospace runs as ``` blocks
    indented by their position. Returns the text and the number of code blocks."""
    gaps = [
        a.y_pt - b.y_pt
        for a, b in zip(lines, lines[1:], strict=False)
        if a.page == b.page and not a.mono and not b.mono and 0 < a.y_pt - b.y_pt < 3 * body
    ]
    lead = statistics.median(gaps) if gaps else body * 1.3
    out: list[str] = []
    blocks = 0
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.mono:
            j = i
            while j < len(lines) and lines[j].mono:
                j += 1
            run = lines[i:j]
            left = min(r.x_pt for r in run)
            width = 0.6 * statistics.median(r.size_pt for r in run)
            steps = [
                a.y_pt - b.y_pt
                for a, b in zip(run, run[1:], strict=False)
                if a.page == b.page and a.y_pt > b.y_pt
            ]
            step = min(steps) if steps else 0.0
            code: list[str] = []
            for k, r in enumerate(run):
                if k and step and r.page == run[k - 1].page and run[k - 1].y_pt - r.y_pt > 1.5 * step:
                    code.append("")
                code.append(" " * max(0, round((r.x_pt - left) / width)) + r.text)
            out.extend(["", "```", *code, "```", ""])
            blocks += 1
            i = j
            continue
        found = table(lines, i)
        if found is not None:
            rows, i = found
            out.extend(["", "| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])])
            out.extend(["| " + " | ".join(r) + " |" for r in rows[1:]] + [""])
            continue
        if out and i and not lines[i - 1].mono:
            prev = lines[i - 1]
            if prev.page == ln.page and prev.y_pt - ln.y_pt > 1.25 * lead:
                out.append("")
        text = ln.text.strip()
        joined = (
            _join_hyphenated(out[-1], text, vocab)
            if out and out[-1] and i and not lines[i - 1].mono
            else None
        )
        if joined is not None:
            out[-1], text = joined
        if text:
            out.append(text)
        i += 1
    return collapse_blank_lines("\n".join(out).strip()), blocks


def _refuse(path: Path, what: str) -> ManualFormatError:
    return ManualFormatError(f"{path}: {what}")


def read_pdf(path: Path, *, strict: bool = True) -> tuple[list[RawSection], PdfLoadReport]:
    """Sections of a PDF manual and what was recovered. ``strict=False`` turns the refusals about
    completeness (truncation, missing closing chapters) into warnings; an unrecoverable structure is
    refused always."""
    path = Path(path)
    reader = _read(path)
    pages = _lines(reader, path)
    n_pages = len(pages)
    drop = running_lines(pages)
    stream = [ln for p, lines in enumerate(pages) for i, ln in enumerate(lines) if (p, i) not in drop]
    body = _body_size(stream)
    contents, contents_at = _contents(stream)
    if contents_at:
        stream = [ln for i, ln in enumerate(stream) if i not in contents_at]
    notes: list[str] = []
    problems: list[str] = []
    marks = _outline(reader)
    not_found: list[str] = []
    deeper: list[_Head] = []
    structure: Structure
    if marks:
        structure = "outline"
        cut = [m for m in marks if m.page is None]
        if cut:
            tail = all(m.page is None for m in marks[marks.index(cut[0]) :])
            msg = (
                f"{len(cut)} of {len(marks)} outline entries point past the last page ({n_pages}) or "
                f"nowhere, from '{cut[0].number}. {cut[0].title}'"
            )
            (problems if tail else notes).append(
                msg + (": pages were cut off the end, the PDF is truncated" if tail else "")
            )
        heads, not_found = _heads_from_outline(stream, marks, body)
        deeper = _heads_between(stream, heads, body)
        heads = sorted([*heads, *deeper], key=lambda h: h.start)
    else:
        expected = {n for n, _, _ in contents} if len(contents) >= 10 else set()
        heads = _heads_from_faces(stream, body, expected)
        structure = "headings"
        if len(heads) < 3:
            heads = _heads_from_patterns(stream)
            structure = "text-patterns"
        if contents:
            found = {h.number for h in heads}
            not_found = [n for n, _, _ in contents if n not in found]
    if contents:
        last_page = max(p for _, _, p in contents)
        if last_page > n_pages:
            problems.append(
                f"its contents list pages up to {last_page} but the PDF has {n_pages} pages: the PDF is "
                "truncated"
            )
    if not heads:
        raise _refuse(
            path,
            "no numbered sections found (no numbered bookmarks, and no headings like "
            "'1. Introduction' or 'Chapter 1.' in the text)",
        )
    listed = {n: t for n, t, _ in contents}
    vocab = _vocabulary(stream)
    pieces: list[RawSection] = []
    blocks = 0
    for k, h in enumerate(heads):
        if h.title.isupper() and h.number in listed:
            h.title = listed[h.number]  # upper-case chapter headings (3.x): the contents has the case
        end = heads[k + 1].start if k + 1 < len(heads) else len(stream)
        text, nb = _render(stream[h.body : max(end, h.body)], body, vocab)
        blocks += nb
        pieces.append(
            RawSection(
                number=h.number,
                title=h.title,
                anchor=None,
                url=None,
                body=text,
                where=f"{path.name} p.{h.page + 1}",
                primary=True,
            )
        )
    ends = [h.start for h in heads[1:]] + [len(stream)]
    unclaimed = [
        ln.text.strip()
        for h, end in zip(heads, ends, strict=True)
        for ln in stream[h.body : end]
        if not ln.mono and ln.size_pt >= body * 1.12
    ]
    if len(unclaimed) > max(3, 0.2 * len(heads)):
        raise _refuse(
            path,
            f"the section structure could not be recovered: {len(heads)} numbered sections found, but "
            f"{len(unclaimed)} other lines are set as headings (e.g. {', '.join(repr(u) for u in unclaimed[:3])}"
            "): headings without numbers. Use the official PDF (it has an outline), the HTML manual or "
            "the Markdown sections",
        )
    total = sum(len(p.body) for p in pieces)
    largest = max(pieces, key=lambda p: len(p.body))
    if len(largest.body) > _LONGEST_SECTION_CHARS or (n_pages >= 10 and len(pieces) < n_pages / 8):
        raise _refuse(
            path,
            f"the section structure could not be recovered: {len(pieces)} sections from {n_pages} pages, "
            f"'{largest.number}' alone holds {len(largest.body):,} of {total:,} characters ("
            + (
                "the outline's headings were not found in the text"
                if structure == "outline"
                else "no outline, and no numbered headings set apart from the body text"
            )
            + "). Use the official PDF (it has an outline), the HTML manual or the Markdown sections",
        )
    if not_found:
        share = len(not_found) / max(1, len(marks) if marks else len(contents))
        msg = (
            f"{len(not_found)} headings listed in the {'outline' if marks else 'contents'} were not found "
            f"in the text (e.g. {', '.join(not_found[:5])})"
        )
        if share > 0.5 and not marks:
            raise _refuse(path, msg + ": the section structure could not be recovered")
        notes.append(msg + ("; those sections start at the top of their page" if marks else ""))
    chapters = [p for p in pieces if "." not in p.number]
    vouched = bool(marks) or bool(contents)
    closing = any(
        _END_MATTER.match(ln.text) and _is_heading_face(ln, body) for ln in stream if ln.page >= n_pages - 3
    )
    if chapters and not _END_MATTER.match(chapters[-1].title) and not closing:
        msg = (
            f"the text ends in chapter {chapters[-1].number} ({chapters[-1].title}); a whole PTX ISA "
            "manual ends with its Notices (or, before 4.0, the .pragma appendix and a Notice page): pages may "
            "be missing"
        )
        (notes if vouched and not problems else problems).append(msg)
    if structure == "text-patterns":
        notes.append("no outline and no heading face: sections were found by numbered-line patterns only")
    if problems and strict:
        raise _refuse(path, "; ".join(problems) + ". Pass the complete manual")
    notes = problems + notes
    report = PdfLoadReport(
        path=str(path),
        pages=n_pages,
        structure=structure,
        sections=len(pieces),
        instruction_sections=sum(1 for p in pieces if names_in_title(p.title)),
        code_blocks=blocks,
        running_lines_removed=len(drop),
        outline_entries=len(marks),
        headings_beyond_outline=len(deeper),
        contents_entries=len(contents),
        headings_not_found=tuple(not_found),
        largest_section_chars=len(largest.body),
        total_chars=total,
        warnings=tuple(notes),
    )
    return pieces, report


def load_pdf(path: Path, *, base_url: str | None = None, strict: bool = True) -> list[RawSection]:
    """Sections of a PDF manual; PDF sections carry no anchors, so no URLs (``base_url`` is unused).
    Each warning of the report is issued as a :class:`ManualLoadWarning`."""
    pieces, report = read_pdf(path, strict=strict)
    for w in report.warnings:
        warnings.warn(f"{path}: {w}", ManualLoadWarning, stacklevel=2)
    return pieces
