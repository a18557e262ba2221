"""Typeset the PTX ISA manual (the shared Markdown sections) as a PDF laid out like NVIDIA's, with Typst.

The PDF loader's tests read these PDFs, so they have what makes real manual PDFs hard to read: a contents
section with dot leaders, chapters that start a new page under a "Chapter N." line, numbered headings in
a larger bold face, running headers and footers (document title, chapter name, page number), syntax
blocks in a monospace face, tables, and text that flows over page breaks. Variants:

* ``--style release``: like the 9.x PDFs (``9.7.1.1. Title`` headings, bookmarks for every heading);
* ``--style legacy``: like ptx_isa_3.1 (``9.7.1.1 Title`` without the trailing dot, upper-case chapter
  titles, "www.nvidia.com" footer);
* ``--no-outline``: no bookmarks at all (as ptx_isa_3.1.pdf), ``--outline-depth N``: bookmarks for the
  first N levels only, ``--no-toc``: no contents section;
* ``--numbered chapters|none``: section headings (or all headings) without numbers, so that the
  structure cannot be recovered from the text;
* ``--drop-last N``: the last N pages removed, the outline kept (its entries then point past the end)
  or, with ``--no-outline``, gone.

    python scripts/make_manual_pdf.py ../shared/corpus/ptx-isa-9.1 out.pdf --sections 1,2,9.7.1,13,14

Needs the ``typst`` package (the dev extra) and pypdf."""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ptxrag.indexer import load_manual
from ptxrag.indexer.schema import Manual, Section
from ptxrag.indexer.text import number_key

STYLES = ("release", "legacy")
#: the labels of an instruction section, set in bold as in the official PDF
LABELS = {"Syntax", "Description", "Semantics", "Notes", "PTX ISA Notes", "Target ISA Notes", "Examples"}


def _q(text: str) -> str:
    """A Typst string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _inline(text: str) -> str:
    """Paragraph text as Typst markup: plain runs as strings, `code` spans in the monospace face."""
    out = []
    for i, part in enumerate(re.split(r"`([^`]+)`", text)):
        if not part:
            continue
        out.append(f"#raw({_q(part)})" if i % 2 else f"#{_q(part)}")
    return "".join(out) or '#""'


def _table(lines: list[str]) -> str:
    rows = [
        [c.strip() for c in ln.strip().strip("|").split("|")]
        for ln in lines
        if not re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", ln)
    ]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = ", ".join(f"[{_inline(c)}]" for r in rows for c in [*r, *[""] * (width - len(r))])
    return f"#table(columns: {width}, stroke: 0.4pt, {cells})\n\n"


def _body(text: str) -> str:
    """Section text (paragraphs, ``` blocks, | tables |) as Typst markup."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            text = " ".join(s.strip() for s in para)
            out.append((f"#strong({_q(text)})" if text in LABELS else _inline(text)) + "\n\n")
            para.clear()

    while i < len(lines):
        ln = lines[i]
        if ln.strip().startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            code = "\n".join(lines[i + 1 : j])
            out.append(f"#raw(block: true, {_q(code)})\n\n")
            i = j + 1
            continue
        if ln.lstrip().startswith("|"):
            flush()
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if not ln.strip():
            flush()
        elif re.match(r"\s*([-*]|\d+\.)\s", ln) or ln.startswith(":   "):
            flush()
            para.append(ln)
        else:
            para.append(ln)
        i += 1
    flush()
    return "".join(out)


NUMBERING = ("all", "chapters", "none")


def _heading_text(s: Section, style: str, numbered: str) -> str:
    if numbered == "none" or (numbered == "chapters" and s.depth > 1):
        return s.title
    return f"{s.number}. {s.title}" if style == "release" else f"{s.number} {s.title}"


def _preamble(title: str, version: str, style: str, outline: bool) -> str:
    doc = f"PTX ISA, Release {version}" if style == "release" else f"Parallel Thread Execution ISA v{version}"
    footer_left = "" if style == "release" else "www.nvidia.com"
    return f"""
#set document(title: {_q(title)})
#set text(font: "Libertinus Serif", size: 10pt)
#show raw: set text(font: "DejaVu Sans Mono", size: 8pt)
#set par(justify: true)
#set heading(numbering: none, bookmarked: {"true" if outline else "false"})
#show heading: set text(font: "New Computer Modern", weight: "bold", hyphenate: false)
#show heading.where(level: 1): it => {{
  let parts = it.body.text.split(" ")
  block(below: 1.4em)[
    #if parts.at(0) != "-" [#text(size: 20pt)[Chapter #parts.at(0)] #linebreak()]
    #text(size: 18pt)[#{"upper" if style == "legacy" else ""}(parts.slice(1).join(" "))]
  ]
}}
#show heading.where(level: 2): set text(size: 14pt)
#show heading.where(level: 3): set text(size: 12pt)
#show heading: it => block(above: 1.2em, below: 0.8em, it)
#let chapter-name() = {{
  let before = query(heading.where(level: 1).before(here()))
  if before.len() > 0 {{ before.last().body.text }} else {{ "" }}
}}
#set page(
  paper: "us-letter",
  margin: (top: 2.6cm, bottom: 2.6cm, x: 2.4cm),
  header: context [
    #set text(size: 8pt)
    #{_q(doc)} #h(1fr) #chapter-name()
    #line(length: 100%, stroke: 0.4pt)
  ],
  footer: context [
    #set text(size: 8pt)
    #line(length: 100%, stroke: 0.4pt)
    #{_q(footer_left)} #h(1fr) #{_q(doc)} | #counter(page).display()
  ],
)
"""


def _contents() -> str:
    """A contents section like the official one: every heading, dot leaders, page numbers; a long
    entry wraps and its page number goes on the last line (Typst's outline)."""
    head = "#heading(level: 1, outlined: false, bookmarked: false)[Contents]\n\n"
    return '#show heading.where(level: 1): it => text(size: 20pt, weight: "bold", it.body)\n' + (
        head + "#set text(size: 9pt)\n#outline(title: none, depth: none, indent: auto)\n#pagebreak()\n"
    )


def selected(manual: Manual, prefixes: Iterable[str] | None) -> list[Section]:
    """The sections whose number is in ``prefixes`` or below one (all when None), with their ancestors."""
    by = manual.by_number()
    keep: set[str] = set()
    wanted = list(prefixes) if prefixes is not None else None
    for s in manual.sections:
        if wanted is None or any(s.number == p or s.number.startswith(p + ".") for p in wanted):
            keep.add(s.number)
            keep.update(p for p in s.parents if p in by)
    return [by[n] for n in sorted(keep, key=number_key)]


def typst_source(
    manual: Manual,
    *,
    prefixes: Iterable[str] | None = None,
    style: str = "release",
    outline: bool = True,
    toc: bool = True,
    numbered: str = "all",
    outline_depth: int | None = None,
) -> str:
    """Typst markup for the sections whose number is in ``prefixes`` or below one (all when None),
    with their ancestors' headings so the tree stays whole."""
    if style not in STYLES or numbered not in NUMBERING:
        raise ValueError(f"style {style!r}, numbered {numbered!r}: one of {STYLES}, one of {NUMBERING}")
    sections = selected(manual, prefixes)
    parts = [_preamble(f"PTX ISA {manual.version}", manual.version, style, outline)]
    if toc:
        parts.append("#[\n" + _contents() + "]\n")
    for s in sections:
        label = f"<s{s.number.replace('.', '-')}>"
        level = min(s.depth, 6)
        head = _heading_text(s, style, numbered)
        if s.depth == 1 and numbered == "none":
            head = f"- {s.title}"  # the chapter show rule splits "N rest"; keep a placeholder number
        if s.depth == 1:
            parts.append("#pagebreak(weak: true)")
        mark = ", bookmarked: false" if outline_depth is not None and s.depth > outline_depth else ""
        parts.append(f"#heading(level: {level}{mark})[#{_q(head)}] {label}\n\n{_body(s.text)}")
    return "\n".join(parts)


def drop_last_pages(pdf: bytes, n: int, *, keep_outline: bool) -> bytes:
    """The PDF without its last ``n`` pages, as a page-range cut of a tool would leave it."""
    from pypdf import PdfReader, PdfWriter

    reader = PdfReader(io.BytesIO(pdf))
    keep = len(reader.pages) - n
    if keep < 1:
        raise ValueError(f"cannot drop {n} of {len(reader.pages)} pages")
    if keep_outline:
        writer = PdfWriter(clone_from=reader)
        for i in range(len(writer.pages) - 1, keep - 1, -1):
            del writer.pages[i]
    else:
        writer = PdfWriter()
        for page in reader.pages[:keep]:
            writer.add_page(page)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def make_pdf(
    markdown: Path,
    *,
    version: str,
    prefixes: Iterable[str] | None = None,
    style: str = "release",
    outline: bool = True,
    toc: bool = True,
    numbered: str = "all",
    outline_depth: int | None = None,
    drop_last: int = 0,
) -> bytes:
    import typst

    manual = load_manual(markdown, version=version)
    src = typst_source(
        manual,
        prefixes=prefixes,
        style=style,
        outline=outline,
        toc=toc,
        numbered=numbered,
        outline_depth=outline_depth,
    )
    # only the fonts Typst carries (Libertinus Serif, New Computer Modern, DejaVu Sans Mono): the same PDF
    # on every machine
    pdf = typst.compile(src.encode("utf-8"), format="pdf", ignore_system_fonts=True)
    assert isinstance(pdf, bytes)
    if drop_last:
        pdf = drop_last_pages(pdf, drop_last, keep_outline=outline)
    return pdf


def compare(sections: Sequence[Section], pdf: Path) -> list[str]:
    """Read ``pdf`` with ptxrag's PDF loader and say how its sections match the Markdown ones: the report,
    sections missing or extra, wrong titles, and the sections whose words match worst (recall: share of
    the Markdown words found; precision: share of the words found that are the section's own)."""
    import time

    from ptxrag.indexer.loaders.pdf import read_pdf

    start = time.perf_counter()
    pieces, report = read_pdf(pdf, strict=False)
    lines = [report.summary(), f"read in {time.perf_counter() - start:.1f} s", *report.warnings]
    by = {s.number: s for s in sections}
    words = re.compile(r"[a-z_][\w.]+")
    scores = []
    for p in pieces:
        if p.number not in by:
            lines.append(f"extra section {p.number} {p.title!r}")
            continue
        s = by[p.number]
        if p.title != s.title:
            lines.append(f"title of {p.number}: {p.title!r}, Markdown {s.title!r}")
        want, got = set(words.findall(s.text.lower())), set(words.findall(p.body.lower()))
        if want or got:
            both = len(want & got)
            scores.append((both / max(1, len(want)), both / max(1, len(got)), p.number))
    found = {p.number for p in pieces}
    missing = [n for n in by if n not in found]
    lines.append(
        f"{len(found & set(by))} of the PDF's sections are Markdown sections; not found: {missing[:20]}"
    )
    for recall, precision, number in sorted(scores, key=lambda x: min(x[0], x[1]))[:8]:
        lines.append(f"{number}: recall {recall:.2f}, precision {precision:.2f}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("markdown", type=Path, help="a folder of the manual's Markdown sections")
    ap.add_argument("out", type=Path)
    ap.add_argument("--version", help="manual version (default: from the folder name, ptx-isa-9.1 -> 9.1)")
    ap.add_argument("--sections", help="comma-separated section numbers to typeset (with what is below)")
    ap.add_argument("--style", choices=STYLES, default="release")
    ap.add_argument("--no-outline", action="store_true")
    ap.add_argument("--no-toc", action="store_true")
    ap.add_argument("--numbered", choices=NUMBERING, default="all")
    ap.add_argument("--outline-depth", type=int, metavar="N", help="bookmarks for the first N levels only")
    ap.add_argument("--drop-last", type=int, default=0, metavar="N")
    ap.add_argument("--typst", action="store_true", help="write the Typst source instead of the PDF")
    ap.add_argument("--check", action="store_true", help="then read it back and compare with the Markdown")
    a = ap.parse_args(argv)
    version = a.version or a.markdown.name.rsplit("-", 1)[-1]
    prefixes = a.sections.split(",") if a.sections else None
    kw = dict(
        style=a.style,
        outline=not a.no_outline,
        toc=not a.no_toc,
        numbered=a.numbered,
        outline_depth=a.outline_depth,
    )
    if a.typst:
        manual = load_manual(a.markdown, version=version)
        a.out.write_text(typst_source(manual, prefixes=prefixes, **kw), encoding="utf-8")  # type: ignore[arg-type]
        return 0
    pdf = make_pdf(a.markdown, version=version, prefixes=prefixes, drop_last=a.drop_last, **kw)  # type: ignore[arg-type]
    a.out.write_bytes(pdf)
    from pypdf import PdfReader

    print(f"{a.out}: {len(PdfReader(io.BytesIO(pdf)).pages)} pages, {len(pdf)} bytes", file=sys.stderr)
    if a.check:
        manual = load_manual(a.markdown, version=version)
        for line in compare(selected(manual, prefixes), a.out):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
