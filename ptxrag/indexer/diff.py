"""What changed between two versions of a manual: sections added, removed, changed or renumbered (moved to
a new number, found by title or, when renamed too, by text), instructions added or removed, and target
architectures first named."""

from __future__ import annotations

import re
from collections import Counter

from .schema import Manual, ManualDiff, Section, SectionChange
from .text import arch_key, number_key

_SIMILAR = 0.5  # Jaccard of word 3-grams above which two sections are one section renamed or moved
_MIN_SHINGLES = 8


def _norm(text: str) -> str:
    """Text compared for changes: whitespace and link targets do not count."""
    text = re.sub(r"https?://\S+", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def _title_names(sections: tuple[Section, ...]) -> set[str]:
    # instructions named by headings ("...Instructions: mbarrier.try_wait"), not the syntax variants
    from .instructions import names_in_title

    return {n for s in sections for n in names_in_title(s.title) if not n.startswith(("%", "."))}


def _change_detail(old: Section, new: Section) -> str:
    parts = []
    if old.title != new.title:
        parts.append(f"title: {old.title!r} -> {new.title!r}")
    a, b = _norm(old.text), _norm(new.text)
    if a != b:
        parts.append(f"text: {len(old.text)} -> {len(new.text)} chars")
        added = sorted(set(new.defines) - set(old.defines))
        if added:
            parts.append("new forms: " + ", ".join(added[:8]))
    return "; ".join(parts)


def _shingles(text: str) -> frozenset[str]:
    words = re.findall(r"[a-z0-9_.%]+", _norm(text))
    return frozenset(" ".join(words[i : i + 3]) for i in range(max(0, len(words) - 2)))


def _similar_pairs(old: list[Section], new: list[Section]) -> list[tuple[float, int, int]]:
    """(Jaccard of word 3-grams, old index, new index) for sections sharing enough text, best first.

    Candidates come from an inverted index of 3-grams, so two long manuals are not compared all-pairs; a
    section with fewer than ``_MIN_SHINGLES`` 3-grams is too short to be recognised by its text alone."""
    old_sh = [_shingles(s.text) for s in old]
    new_sh = [_shingles(s.text) for s in new]
    where: dict[str, list[int]] = {}
    for i, sh in enumerate(old_sh):
        if len(sh) >= _MIN_SHINGLES:
            for g in sh:
                where.setdefault(g, []).append(i)
    out = []
    for j, sh in enumerate(new_sh):
        if len(sh) < _MIN_SHINGLES:
            continue
        shared: dict[int, int] = {}
        for g in sh:
            for i in where.get(g, ()):
                shared[i] = shared.get(i, 0) + 1
        for i, k in shared.items():
            score = k / (len(old_sh[i]) + len(sh) - k)
            if score >= _SIMILAR:
                out.append((score, i, j))
    return sorted(out, key=lambda t: (-t[0], t[1], t[2]))


def _pair_sections(old: list[Section], new: list[Section]) -> list[tuple[int, int]]:
    """One-to-one pairs (old index, new index) of the same section across versions, in this order of trust:
    same number and title; same title elsewhere (a title used once in each version, or a repeated title with
    similar text); similar text (renamed and moved);
    finally a leftover number present in both is one section rewritten in place."""
    po: dict[int, int] = {}
    pn: set[int] = set()

    def take(i: int, j: int) -> None:
        po[i] = j
        pn.add(j)

    new_at = {s.number: j for j, s in enumerate(new)}
    for i, s in enumerate(old):
        j = new_at.get(s.number)
        if j is not None and new[j].title == s.title:
            take(i, j)
    sim = _similar_pairs(old, new)
    score = {(i, j): x for x, i, j in sim}
    counts = Counter(s.title for s in old) + Counter(s.title for s in new)
    unique = {t: n == 2 for t, n in counts.items()}  # once in each version
    by_title: dict[str, list[int]] = {}
    for j, s in enumerate(new):
        if j not in pn:
            by_title.setdefault(s.title, []).append(j)
    for i, s in enumerate(old):
        if i in po:
            continue
        free = [j for j in by_title.get(s.title, ()) if j not in pn]
        if not unique.get(s.title, False):
            # a title used more than once ("Syntax") names no one section: it pairs only with similar text
            free = [j for j in free if (i, j) in score]
        if free:
            take(i, max(free, key=lambda j: (score.get((i, j), 0.0), -abs(j - i))))
    for _, i, j in sim:
        if i not in po and j not in pn:
            take(i, j)
    for i, s in enumerate(old):
        j = new_at.get(s.number)
        if i not in po and j is not None and j not in pn:
            take(i, j)
    return sorted(po.items())


def diff_manuals(old: Manual, new: Manual) -> ManualDiff:
    a, b = list(old.sections), list(new.sections)
    pairs = _pair_sections(a, b)
    paired_old = {i for i, _ in pairs}
    paired_new = {j for _, j in pairs}
    changed = []
    for i, j in pairs:
        o, s = a[i], b[j]
        if o.number == s.number:
            detail = _change_detail(o, s)
            if detail:
                changed.append(SectionChange(number=s.number, title=s.title, kind="changed", detail=detail))
            continue
        detail = f"was {o.number}"
        if o.title != s.title:
            detail += f"; title: {o.title!r} -> {s.title!r}"
        if _norm(o.text) != _norm(s.text):
            detail += "; text changed"
        changed.append(SectionChange(number=s.number, title=s.title, kind="renumbered", detail=detail))
    added = [
        SectionChange(number=s.number, title=s.title, kind="added")
        for j, s in enumerate(b)
        if j not in paired_new
    ]
    removed = [
        SectionChange(number=o.number, title=o.title, kind="removed")
        for i, o in enumerate(a)
        if i not in paired_old
    ]
    added.sort(key=lambda c: number_key(c.number))
    removed.sort(key=lambda c: number_key(c.number))
    old_i, new_i = _title_names(old.sections), _title_names(new.sections)
    old_arch, new_arch = set(old.architectures()), set(new.architectures())
    return ManualDiff(
        old_version=old.version,
        new_version=new.version,
        sections_added=tuple(added),
        sections_removed=tuple(removed),
        sections_changed=tuple(sorted(changed, key=lambda c: number_key(c.number))),
        instructions_added=tuple(sorted(new_i - old_i)),
        instructions_removed=tuple(sorted(old_i - new_i)),
        architectures_added=tuple(sorted(new_arch - old_arch, key=arch_key)),
    )
