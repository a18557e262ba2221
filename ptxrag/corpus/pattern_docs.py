"""Patterns and debug hints: the knowledge pack's Markdown layers beside the contracts.

A *pattern* (``patterns/*.md``) is a design an expert builds from the instructions (a warp-specialised
pipeline, a persistent tile scheduler, a multicast load, a TMA-store epilogue, the FA3 attention pipeline):
numbered steps, each citing the PTX ISA sections it rests on, and the tested files of this repository that show
it (``shown_by``, paths under the ``ptxrag`` package). Its front matter says which tasks it is for:
``requires`` (PTX instructions that must all be among the task's required ones, dot-boundary prefixes) and
optionally ``families`` (task families, e.g. ``attention``, that it is limited to).

*Debug hints* (``hints/*.md``) map what the evaluator reports (a compile error, an instruction missing from
the SASS, a hang, a wrong result) to the contract rules that usually explain it, per target architecture
(``arch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .documents import KnowledgeDoc, load_markdown
from .files import CorpusError, package_dir

PATTERN_KEYS = ("id", "title", "instructions", "cites", "requires", "shown_by")
HINTS_KEYS = ("id", "title", "instructions", "cites", "arch")


@dataclass(frozen=True)
class PatternDoc(KnowledgeDoc):
    """A pattern document and what selects it."""

    #: PTX instructions (dot-boundary prefixes) that must all be among a task's required instructions
    requires: tuple[str, ...] = ()
    #: task families the pattern is limited to (empty: any family)
    families: tuple[str, ...] = ()
    #: files under the ``ptxrag`` package that show the pattern (empty: none does; the text says so)
    shown_by: tuple[str, ...] = ()

    def fits(self, required_ptx: Iterable[str], family: str = "") -> bool:
        """True when every ``requires`` entry covers one of ``required_ptx`` and the family is allowed."""
        req = [p.strip().lower() for p in required_ptx if p.strip()]
        if self.families and family.strip().lower() not in {f.lower() for f in self.families}:
            return False
        return bool(self.requires) and all(any(_covers(r, p) for p in req) for r in self.requires)

    @property
    def specificity(self) -> int:
        """How much of a task the requirements pin down: their dotted components, summed."""
        return sum(len(r.split(".")) for r in self.requires)


@dataclass(frozen=True)
class HintsDoc(KnowledgeDoc):
    """A debug-hints document and the target architectures it is for."""

    archs: tuple[str, ...] = ()


def _covers(tag: str, instruction: str) -> bool:
    """``tag`` is ``instruction`` or a dot-boundary prefix of it (``cp.async.bulk.tensor`` covers
    ``cp.async.bulk.tensor.shared::cluster.global``; never the other way round)."""
    t, i = tag.strip().lower(), instruction.strip().lower()
    return i == t or i.startswith(t + ".")


def _paths(folder: str) -> list[Path]:
    d = package_dir() / folder
    return sorted(d.glob("*.md")) if d.is_dir() else []


def _str_list(meta: dict[str, str | list[str]], key: str, path: Path) -> tuple[str, ...]:
    v = meta.get(key, [])
    if not isinstance(v, list) or any(not x for x in v):
        raise CorpusError(f"{path}: front-matter {key!r} must be a [list] without empty entries")
    return tuple(v)


def load_pattern(path: Path) -> PatternDoc:
    """Read and validate one pattern document."""
    doc, meta = load_markdown(path, "patterns", PATTERN_KEYS)
    requires = _str_list(meta, "requires", path)
    if not requires:
        raise CorpusError(f"{path}: 'requires' must name at least one PTX instruction")
    shown_by = _str_list(meta, "shown_by", path)
    missing = [p for p in shown_by if not (package_dir().parent / p).is_file()]
    if missing:
        raise CorpusError(f"{path}: shown_by names files that do not exist under ptxrag/: {missing}")
    return PatternDoc(
        **vars(doc), requires=requires, families=_str_list(meta, "families", path), shown_by=shown_by
    )


def load_hints(path: Path) -> HintsDoc:
    """Read and validate one debug-hints document."""
    doc, meta = load_markdown(path, "hints", HINTS_KEYS)
    archs = _str_list(meta, "arch", path)
    if not archs:
        raise CorpusError(f"{path}: 'arch' must name at least one target, e.g. [sm_90a]")
    return HintsDoc(**vars(doc), archs=tuple(a.lower() for a in archs))


def patterns() -> list[PatternDoc]:
    """Every pattern document, sorted by id."""
    return sorted((load_pattern(p) for p in _paths("patterns")), key=lambda d: d.doc_id)


def pattern_for(required_ptx: Iterable[str], family: str = "") -> PatternDoc | None:
    """The one pattern for a task: of those that fit (``PatternDoc.fits``), one limited to the task's family
    first, then the most specific requirements, then the smallest id. None when no pattern fits."""
    req = list(required_ptx)
    fitting = [p for p in patterns() if p.fits(req, family)]
    if not fitting:
        return None
    return min(fitting, key=lambda p: (not p.families, -p.specificity, p.doc_id))


def debug_hints(arch: str | None = None) -> list[HintsDoc]:
    """Every debug-hints document, or those for ``arch`` (e.g. ``sm_90a``), sorted by id."""
    docs = sorted((load_hints(p) for p in _paths("hints")), key=lambda d: d.doc_id)
    if arch is None:
        return docs
    return [d for d in docs if arch.strip().lower() in d.archs]
