"""The PDF manual (pypdf), read so that what it yields can be trusted or is refused.

Text comes as lines that know their page, height and face (``pdf_lines``); headings are found by
``pdf_headings``. Running headers and footers
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ManualFormatError
from ..instructions import names_in_title
from ..text import collapse_blank_lines
from .pdf_headings import (
    BOOKMARK,
    Head,
    Mark,
    body_size,
    heads_between,
    heads_from_faces,
    heads_from_outline,
    heads_from_patterns,
    is_heading_face,
    read_contents,
)
from .pdf_lines import Line, page_lines, running_lines, table
from .tree import RawSection

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
            + (f", a contents section of {self.contents_entries} entries" if self.contents_entries else "")
            + f", {self.code_blocks} code blocks, {self.running_lines_removed} running header/footer lines "
            f"removed, largest section {self.largest_section_chars:,} of {self.total_chars:,} characters"
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


def _outline(reader: Any) -> list[Mark]:
    """Every numbered bookmark, in outline order; unnumbered ones (Contents, Index) are skipped."""
    out: list[Mark] = []

    def visit(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                visit(item)
                continue
            title = str(getattr(item, "title", "") or "").strip()
            m = BOOKMARK.match(title)
            if not m:
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - a broken destination counts as pointing nowhere
                page = None
            ok = page is not None and 0 <= page < len(reader.pages)
            out.append(Mark(m.group(1), re.sub(r"\s+", " ", m.group(2)), page if ok else None))

    try:
        visit(reader.outline)
    except Exception:  # noqa: BLE001 - a damaged outline: fall back to the headings
        return []
    return out


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
    body = body_size(stream)
    contents, contents_at = read_contents(stream)
    if contents_at:
        stream = [ln for i, ln in enumerate(stream) if i not in contents_at]
    notes: list[str] = []
    problems: list[str] = []
    marks = _outline(reader)
    not_found: list[str] = []
    deeper: list[Head] = []
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
        heads, not_found = heads_from_outline(stream, marks, body)
        deeper = heads_between(stream, heads, body)
        heads = sorted([*heads, *deeper], key=lambda h: h.start)
    else:
        expected = {n for n, _, _ in contents} if len(contents) >= 10 else set()
        heads = heads_from_faces(stream, body, expected)
        structure = "headings"
        if len(heads) < 3:
            heads = heads_from_patterns(stream)
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
        _END_MATTER.match(ln.text) and is_heading_face(ln, body) for ln in stream if ln.page >= n_pages - 3
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
