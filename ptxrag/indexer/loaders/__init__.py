"""Manual loaders: the official single-page HTML, the PDF, and folders of Markdown sections. Each returns
the same ``Manual`` (section tree, cleaned text, instruction names)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ManualFormatError
from ..limits import MAX_FILE_BYTES, MAX_MARKDOWN_FILE_BYTES, check_file_size
from ..schema import Manual, ManualFormat
from .tree import RawSection, assemble


def detect_format(path: Path) -> ManualFormat:
    if path.is_dir():
        return "markdown"
    suffix = path.suffix.lower()
    if suffix in {".md", ".markdown"}:
        return "markdown"
    if suffix in {".html", ".htm"}:
        return "html"
    if suffix == ".pdf":
        return "pdf"
    try:
        with path.open("rb") as f:
            head = f.read(1024)
    except OSError as e:
        raise ManualFormatError(f"{path}: cannot read ({e})") from e
    if head.startswith(b"%PDF"):
        return "pdf"
    if b"<html" in head.lower() or b"<!doctype html" in head.lower():
        return "html"
    raise ManualFormatError(f"{path}: not a folder of Markdown, an .html or a .pdf file")


def load_manual(
    path: Path,
    *,
    version: str,
    fmt: ManualFormat | None = None,
    base_url: str | None = None,
    source: str = "ptx-isa",
) -> Manual:
    """Read a manual from a file or folder. ``base_url`` makes relative anchors absolute
    (``#mbarrier`` -> ``https://.../parallel-thread-execution/index.html#mbarrier``)."""
    path = Path(path)
    if not path.exists():
        raise ManualFormatError(f"{path}: no such file or folder")
    fmt = fmt or detect_format(path)
    if path.is_file():  # every format, the PDF too, before a loader reads it
        check_file_size(path, MAX_MARKDOWN_FILE_BYTES if fmt == "markdown" else MAX_FILE_BYTES)
    pieces: list[RawSection]
    if fmt == "markdown":
        from .markdown import load_markdown

        pieces, _ = load_markdown(path, base_url=base_url)
    elif fmt == "html":
        from .html import load_html

        pieces = load_html(path, base_url=base_url)
    else:
        from .pdf import load_pdf

        pieces = load_pdf(path, base_url=base_url)
    return assemble(pieces, version=version, fmt=fmt, origin=str(path), source=source)


__all__ = ["RawSection", "assemble", "detect_format", "load_manual"]
