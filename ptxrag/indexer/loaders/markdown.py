"""Folders of Markdown sections (or one Markdown file), as converted from the official HTML manual.

Two layouts are known and both work: one file per section in nested folders (each file holds only its own
section), and one flat folder where a parent's file repeats all of its children's text. Every file is split
at its numbered headings (ATX ``#### 9.7.13.15. Title`` or setext ``9.1. Title`` over ``----``); a section
that appears in several files is kept once, preferring the file that starts with it."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ManualFormatError
from ..limits import check_folder_size
from ..text import clean_inline, clean_markdown
from .tree import RawSection

_ATX = re.compile(r"^(#{1,6})\s+(\d+(?:\.\d+)*)\.?\s+(.+?)\s*$")
_SETEXT_HEAD = re.compile(r"^(\d+(?:\.\d+)*)\.\s+(\S.*?)\s*$")
_SETEXT_RULE = re.compile(r"^\s*(?:={3,}|-{3,})\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK_TARGET = re.compile(r"\]\(([^()\s]+)")


def parse_heading(rest: str, base_url: str | None) -> tuple[str, str | None, str | None]:
    """Title, anchor and absolute URL from the text of a heading after its number."""
    url: str | None = None
    anchor: str | None = None
    for target in _LINK_TARGET.findall(rest):
        if "#" in target:
            anchor = target.split("#", 1)[1] or None
            if target.startswith(("http://", "https://")):
                url = target
            elif base_url and anchor:
                url = f"{base_url.split('#', 1)[0]}#{anchor}"
            break
    title = re.sub(r"\s+", " ", clean_inline(rest)).strip().rstrip("#").strip()
    return title, anchor, url


def split_file(text: str, where: str, base_url: str | None) -> list[RawSection]:
    """The numbered sections of one Markdown file, in order; text before the first is dropped."""
    lines = text.splitlines()
    pieces: list[RawSection] = []
    current: dict | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            pieces.append(RawSection(body=clean_markdown("\n".join(body)), **current))

    in_code = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_code = not in_code
        heading: tuple[str, str] | None = None
        skip = 1
        if not in_code:
            m = _ATX.match(line)
            if m:
                heading = (m.group(2), m.group(3))
            elif i + 1 < len(lines) and _SETEXT_RULE.match(lines[i + 1]):
                s = _SETEXT_HEAD.match(line)
                if s:
                    heading, skip = (s.group(1), s.group(2)), 2
        if heading is not None:
            number, rest = heading
            title, anchor, url = parse_heading(rest, base_url)
            if current is not None and current["number"] == number and len("".join(body).strip()) < 300:
                # "# 9.7.1. Title" (its tail perhaps wrapped onto the next line) followed at once by
                # "### 9.7.1. [Title](url)": one heading
                current.update(title=title or current["title"], anchor=anchor or current["anchor"])
                current["url"] = url or current["url"]
            else:
                close()
                current = {
                    "number": number,
                    "title": title,
                    "anchor": anchor,
                    "url": url,
                    "where": f"{where}:{i + 1}",
                    "primary": not pieces,
                }
                body = []
            i += skip
            continue
        if current is not None:
            body.append(line)
        i += 1
    close()
    return pieces


def load_markdown(path: Path, *, base_url: str | None = None) -> tuple[list[RawSection], str]:
    """All numbered sections of a Markdown file or folder (recursively), in file order."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.md") if p.is_file())
        if not files:
            raise ManualFormatError(f"{path}: the folder holds no Markdown (.md) files")
    elif path.is_file():
        files = [path]
    else:
        raise ManualFormatError(f"{path}: no such file or folder")
    check_folder_size(files, path)
    pieces: list[RawSection] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ManualFormatError(f"{f}: not UTF-8 text ({e})") from e
        pieces.extend(split_file(text, str(f.relative_to(path) if path.is_dir() else f.name), base_url))
    if not pieces:
        raise ManualFormatError(
            f"{path}: {len(files)} Markdown file(s) but no numbered section headings "
            "(expected headings like '## 9.7.13.15. Title')"
        )
    return pieces, "markdown"
