"""From the raw headed pieces every loader produces to a ``Manual``: one copy per section number, parent
chains, and the instruction names each section defines or mentions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ManualFormatError
from ..instructions import names_in_text, names_in_title, syntax_variants
from ..limits import check_section_size
from ..schema import Manual, ManualFormat, Section
from ..text import collapse_blank_lines, number_key, parent_number, unique


@dataclass
class RawSection:
    """A numbered heading and the text up to the next numbered heading, as one loader saw it."""

    number: str
    title: str
    anchor: str | None
    url: str | None
    body: str
    where: str
    """file (and position) it came from, for error messages"""
    primary: bool
    """True when this piece is the first section of its file: the section's own copy, not a parent
    file repeating its children"""


def _merge(a: RawSection, b: RawSection) -> RawSection:
    """Two pieces for one number: keep the section's own copy; fill anchor/URL from the other."""
    keep, other = (a, b) if (a.primary or not b.primary) else (b, a)
    if not keep.body.strip() and other.body.strip():
        keep, other = other, keep
    return RawSection(
        number=keep.number,
        title=keep.title if len(keep.title) >= len(other.title) else other.title,
        anchor=keep.anchor or other.anchor,
        url=keep.url or other.url,
        body=keep.body,
        where=keep.where,
        primary=keep.primary or other.primary,
    )


def assemble(
    pieces: Iterable[RawSection], *, version: str, fmt: ManualFormat, origin: str, source: str = "ptx-isa"
) -> Manual:
    merged: dict[str, RawSection] = {}
    duplicates = 0
    for p in pieces:
        check_section_size(p.number, p.body, p.where)
        if p.number in merged:
            prev = merged[p.number]
            if prev.body.strip() and p.body.strip():
                duplicates += 1
            merged[p.number] = _merge(prev, p)
        else:
            merged[p.number] = p
    if not merged:
        raise ManualFormatError(f"{origin}: no numbered section headings found (like '9.7.13.15.16. ...')")
    numbers = sorted(merged, key=number_key)
    defines: dict[str, tuple[str, ...]] = {}
    for n in numbers:
        raw = merged[n]
        title_names = names_in_title(raw.title)
        defines[n] = unique([*title_names, *syntax_variants(raw.body, title_names)])
    families = {d.lstrip("%.").split(".", 1)[0] for names in defines.values() for d in names}
    sections: list[Section] = []
    for n in numbers:
        raw = merged[n]
        parents: list[str] = []
        up = parent_number(n)
        while up is not None:
            if up in merged:
                parents.append(up)
            up = parent_number(up)
        body = collapse_blank_lines(raw.body)
        mentions = [m for m in names_in_text(body, families) if m not in defines[n]]
        sections.append(
            Section(
                number=n,
                title=raw.title,
                anchor=raw.anchor,
                url=raw.url,
                parents=tuple(reversed(parents)),
                text=body,
                defines=defines[n],
                mentions=tuple(mentions[:60]),
            )
        )
    return Manual(
        source=source,
        version=version,
        format=fmt,
        origin=origin,
        sections=tuple(sections),
        duplicates_dropped=duplicates,
    )
