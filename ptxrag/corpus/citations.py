"""Resolve PTX ISA section numbers against a Markdown copy of the manual (e.g. shared/corpus/ptx-isa-9.1).

The manual's files carry their section number in a heading, e.g. ``# 9.7.13.15.16. Parallel Synchronization ...``
(some files open with a slug and carry the numbered heading a few lines down; nested sub-sections appear as
deeper headings inside a file). Every numbered heading counts as an existing section.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .documents import KnowledgeDoc
from .files import CorpusError

_HEADING_RE = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s+(?:\[)?(.*?)(?:\]\(.*)?$", re.MULTILINE)


@dataclass(frozen=True)
class ManualIndex:
    """Section number -> (file, title) for one copy of the PTX ISA manual."""

    root: Path
    sections: dict[str, tuple[Path, str]] = field(default_factory=dict)

    @classmethod
    def build(cls, root: Path) -> ManualIndex:
        if not root.is_dir():
            raise CorpusError(f"{root}: PTX ISA manual folder not found")
        sections: dict[str, tuple[Path, str]] = {}
        for path in sorted(root.rglob("*.md")):
            for m in _HEADING_RE.finditer(path.read_text(encoding="utf-8", errors="replace")):
                sections.setdefault(m.group(1), (path, m.group(2).strip().strip("`")))
        if not sections:
            raise CorpusError(f"{root}: no numbered section headings found; is this the PTX ISA manual?")
        return cls(root, sections)

    def __contains__(self, section: object) -> bool:
        return isinstance(section, str) and section in self.sections

    def title(self, section: str) -> str:
        if section not in self.sections:
            raise CorpusError(f"section {section} is not in the manual at {self.root}")
        return self.sections[section][1]


def unresolved_citations(docs: Iterable[KnowledgeDoc], index: ManualIndex) -> dict[str, list[str]]:
    """doc_id -> cited section numbers that the manual does not have (only docs with a problem appear)."""
    out: dict[str, list[str]] = {}
    for d in docs:
        missing = [c for c in d.cites if c not in index]
        if missing:
            out[d.doc_id] = missing
    return out
