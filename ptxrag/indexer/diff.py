"""What changed between two versions of a manual: sections added, removed, changed or renumbered (same
title under a new number), instructions added or removed, and target architectures first named."""

from __future__ import annotations

import re

from .schema import Manual, ManualDiff, Section, SectionChange
from .text import arch_key, number_key


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


def diff_manuals(old: Manual, new: Manual) -> ManualDiff:
    a, b = old.by_number(), new.by_number()
    removed_titles = {a[n].title: n for n in a if n not in b}
    added, removed, changed = [], [], []
    renumbered_old: set[str] = set()
    for n in sorted(set(b) - set(a), key=number_key):
        s = b[n]
        was = removed_titles.get(s.title)
        if was is not None and was not in renumbered_old:
            renumbered_old.add(was)
            detail = f"was {was}" + ("" if _norm(a[was].text) == _norm(s.text) else "; text changed")
            changed.append(SectionChange(number=n, title=s.title, kind="renumbered", detail=detail))
        else:
            added.append(SectionChange(number=n, title=s.title, kind="added"))
    for n in sorted(set(a) - set(b), key=number_key):
        if n not in renumbered_old:
            removed.append(SectionChange(number=n, title=a[n].title, kind="removed"))
    for n in sorted(set(a) & set(b), key=number_key):
        detail = _change_detail(a[n], b[n])
        if detail:
            changed.append(SectionChange(number=n, title=b[n].title, kind="changed", detail=detail))
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
