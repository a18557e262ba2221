"""The official single-page HTML manual (Sphinx).

The article body nests ``<section id=...>`` elements; each holds an ``h1``-``h6`` heading that starts with
its number (``<span class="section-number">9.7.13.15.16. </span>Title``) and a permalink
(``<a class="headerlink">``). The loader walks the body in document order, starts a section at every
numbered heading, and renders what follows as Markdown-ish text: paragraphs, list items, ``` code blocks
and | tables |. Navigation, scripts, permalinks and copy buttons are dropped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import ManualFormatError
from ..limits import check_file_size
from ..text import clean_markdown
from .tree import RawSection

_HEADING = re.compile(r"^h[1-6]$")
_NUMBERED = re.compile(r"^\s*(\d+(?:\.\d+)*)\.?\s+(\S.*)$", re.DOTALL)
_DROP_TAGS = ("script", "style", "nav", "header", "footer", "noscript", "button", "svg", "form")
_DROP_CLASSES = ("headerlink", "copybtn", "wy-nav-side", "rst-footer-buttons", "related", "sphinxsidebar")
_BLOCKS = {"p", "dt", "dd", "caption", "figcaption", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
_CONTAINERS = {
    "div",
    "section",
    "article",
    "main",
    "ul",
    "ol",
    "dl",
    "figure",
    "span",
    "body",
    "html",
    "td",
    "li",
}


def _text(node: Any) -> str:
    text = re.sub(r"\s+", " ", node.get_text(" ", strip=True)).strip()
    return re.sub(r"\s+([.,;:)])(?=\s|$)", r"\1", text)


def _table(node: Any) -> str:
    rows = []
    for tr in node.find_all("tr"):
        cells = [_text(c).replace("|", "\\|") for c in tr.find_all(["th", "td"])]
        if cells:
            rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return ""
    width = rows[0].count(" | ") + 1
    return "\n".join([rows[0], "| " + " | ".join(["---"] * width) + " |", *rows[1:]])


def _anchor(heading: Any) -> str | None:
    if heading.get("id"):
        return str(heading["id"])
    link = heading.find("a", class_="headerlink") or heading.find("a", href=re.compile(r"^#"))
    if link is not None and str(link.get("href", "")).startswith("#"):
        return str(link["href"])[1:] or None
    parent = heading.find_parent(lambda t: t.name in ("section", "div") and t.get("id"))
    return str(parent["id"]) if parent is not None else None


class _Walker:
    def __init__(self, where: str, base_url: str | None) -> None:
        self.where = where
        self.base_url = base_url.split("#", 1)[0] if base_url else None
        self.pieces: list[RawSection] = []
        self.current: dict | None = None
        self.lines: list[str] = []

    def close(self) -> None:
        if self.current is not None:
            self.pieces.append(RawSection(body=clean_markdown("\n\n".join(self.lines)), **self.current))
        self.lines = []

    def emit(self, text: str) -> None:
        if self.current is not None and text.strip():
            self.lines.append(text)

    def heading(self, node: Any) -> None:
        for bad in node.find_all("a", class_="headerlink"):
            bad.decompose()
        text = _text(node)
        m = _NUMBERED.match(text)
        if not m:
            self.emit(f"**{text}**")
            return
        self.close()
        anchor = _anchor(node)
        self.current = {
            "number": m.group(1),
            "title": m.group(2).strip(),
            "anchor": anchor,
            "url": f"{self.base_url}#{anchor}" if (self.base_url and anchor) else None,
            "where": f"{self.where} <{node.name}> {m.group(1)}",
            "primary": True,
        }

    def walk(self, node: Any) -> None:
        from bs4 import NavigableString, Tag

        for child in node.children:
            if isinstance(child, NavigableString):
                if child.strip() and type(child) is NavigableString:
                    self.emit(re.sub(r"\s+", " ", str(child)).strip())
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if _HEADING.match(name):
                self.heading(child)
            elif name == "pre":
                self.emit("```\n" + child.get_text().strip("\n") + "\n```")
            elif name == "table":
                self.emit(_table(child))
            elif name == "li":
                if child.find(["pre", "table", "ul", "ol"]) is not None:
                    self.walk(child)
                else:
                    self.emit("* " + _text(child))
            elif name in _BLOCKS:
                self.emit(_text(child))
            elif name in _CONTAINERS or child.find(["p", "pre", "table", "h1", "h2", "h3", "h4", "h5", "h6"]):
                self.walk(child)
            elif name != "img":
                self.emit(_text(child))


def _root(soup: Any) -> Any:
    for selector in (
        'div[itemprop="articleBody"]',
        "article",
        'div[role="main"]',
        "main",
        "div.body",
        "body",
    ):
        found = soup.select_one(selector)
        if found is not None:
            return found
    return soup


def load_html(path: Path, *, base_url: str | None = None) -> list[RawSection]:
    from bs4 import BeautifulSoup

    try:
        check_file_size(path)
        raw = path.read_bytes()
    except OSError as e:
        raise ManualFormatError(f"{path}: cannot read ({e})") from e
    soup = BeautifulSoup(raw, "html.parser")
    if soup.find(["h1", "h2", "h3", "h4", "h5", "h6"]) is None:
        raise ManualFormatError(f"{path}: HTML without any headings; expected the PTX ISA manual page")
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for cls in _DROP_CLASSES:
        for tag in soup.find_all(class_=cls):
            tag.decompose()
    walker = _Walker(path.name, base_url)
    walker.walk(_root(soup))
    walker.close()
    if not walker.pieces:
        raise ManualFormatError(
            f"{path}: HTML has headings but none is numbered like '9.7.13.15.16. Title'; "
            "is this the PTX ISA manual?"
        )
    return walker.pieces
