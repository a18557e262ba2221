"""A small document model (headings, paragraphs, tables, figures) and its two renderings: Markdown (figures
as PNG files beside it) and one self-contained HTML page (figures inline as base64 PNG, styles inline)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Paragraph:
    text: str
    kind: str = "p"  # p | note | warning


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    name: str  # file stem, e.g. "ablation"
    png: bytes
    caption: str


Block = Paragraph | Table | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section] = field(default_factory=list)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document, figures_dir: str = "figures") -> str:
    out = [f"# {doc.title}", ""]
    for s in doc.sections:
        out += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, Paragraph):
                prefix = {"note": "> ", "warning": "> **Note:** "}.get(b.kind, "")
                out += [prefix + b.text, ""]
            elif isinstance(b, Table):
                if b.caption:
                    out += [f"*{b.caption}*", ""]
                out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
                out.append("|" + "|".join(" --- " for _ in b.headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            else:
                out += [f"![{b.caption}]({figures_dir}/{b.name}.png)", "", f"*{b.caption}*", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: .8em 0 1.4em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; }
tr:nth-child(even) td { background: #fafafa; }
caption { caption-side: top; text-align: left; font-style: italic; padding: 4px 0; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-style: italic; color: #555; font-size: 13px; }
.note { color: #444; border-left: 4px solid #ccc; padding-left: .8em; }
.warning { background: #fff8e1; border-left: 4px solid #f0b400; padding: .5em .8em; }
code { background: #f4f4f4; padding: 0 3px; }
"""


def to_html(doc: Document) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(doc.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(doc.title)}</h1>",
    ]
    for s in doc.sections:
        parts.append(f"<h2>{e(s.title)}</h2>")
        for b in s.blocks:
            if isinstance(b, Paragraph):
                cls = f' class="{b.kind}"' if b.kind != "p" else ""
                parts.append(f"<p{cls}>{_inline(b.text)}</p>")
            elif isinstance(b, Table):
                parts.append("<table>")
                if b.caption:
                    parts.append(f"<caption>{e(b.caption)}</caption>")
                parts.append("<tr>" + "".join(f"<th>{e(h)}</th>" for h in b.headers) + "</tr>")
                for row in b.rows:
                    parts.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>")
                parts.append("</table>")
            else:
                data = base64.b64encode(b.png).decode("ascii")
                parts.append(
                    f'<figure><img alt="{e(b.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{e(b.caption)}</figcaption></figure>"
                )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code> and [text](relative/path) into links (the only Markdown
    the report's text uses). Links are kept only when relative (no scheme), so a report never points away."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else _LINK.sub(_link, p) for i, p in enumerate(pieces))


def _link(m: re.Match[str]) -> str:
    label, href = m.group(1), m.group(2)
    if ":" in href.split("/", 1)[0]:  # a scheme (http:, javascript:): not a link inside the study folder
        return m.group(0)
    return f'<a href="{href}">{label}</a>'


def write(doc: Document, out: Path, stem: str = "report") -> tuple[Path, Path]:
    """``out/<stem>.md`` with ``out/figures/*.png``, and ``out/<stem>.html`` (self-contained)."""
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for s in doc.sections:
        for b in s.blocks:
            if isinstance(b, Figure):
                (figs / f"{b.name}.png").write_bytes(b.png)
    md, page = out / f"{stem}.md", out / f"{stem}.html"
    md.write_text(to_markdown(doc))
    page.write_text(to_html(doc))
    return md, page
