"""PTX instruction names: which a section defines or mentions, which a query asks about, and how well a
query name matches a section (exact, a more specific variant of a defined name, or nothing)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from .text import unique

#: a PTX instruction, directive (.target) or special register (%tid) name, qualifiers (::cta) removed
NAME_RE = re.compile(r"^[%.]?[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$")
_NAME_IN_TEXT = re.compile(r"(?<![\w.%:])[%.]?[a-z][a-z0-9_]*(?:(?:\.|::)[a-z0-9_]+)+")
_QUALIFIER = re.compile(r"::[a-z0-9_]+")
_TITLE_HEAD = re.compile(r"instructions?|directives?|special registers?", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?:,|/|\band\b)\s*")

K = TypeVar("K", bound=Hashable)

#: PTX mnemonics that are also everyday words: in a query they count as a name only when quoted or dotted
#: ("redux.sync add min max" asks about redux.sync, not about add)
COMMON_WORD_MNEMONICS = frozenset(
    [
        "abs",
        "add",
        "and",
        "bar",
        "barrier",
        "call",
        "copysign",
        "cos",
        "discard",
        "div",
        "exit",
        "fence",
        "ld",
        "mad",
        "match",
        "max",
        "min",
        "mov",
        "mul",
        "neg",
        "not",
        "or",
        "prefetch",
        "red",
        "rem",
        "ret",
        "set",
        "sin",
        "sqrt",
        "st",
        "sub",
        "tex",
        "trap",
        "vote",
        "xor",
    ]
)


def base_name(token: str) -> str:
    """``cp.async.bulk.tensor.2d.shared::cluster.global`` -> ``cp.async.bulk.tensor.2d.shared.global``."""
    return _QUALIFIER.sub("", token.strip().strip("`'\"").lower()).rstrip(".")


def names_in_title(title: str) -> tuple[str, ...]:
    """Names a heading of the form "<Family> Instructions: `a` / `b`" (or "... Directives: .x",
    "Special Registers: %tid") is the reference for."""
    if ":" not in title:
        return ()
    head, tail = title.split(":", 1)
    if not _TITLE_HEAD.search(head):
        return ()
    tail = re.sub(r"\(deprecated\)", "", tail)
    names = []
    for part in _SPLIT.split(tail):
        name = base_name(part.strip().strip("`'\""))
        if name and NAME_RE.match(name):
            names.append(name)
    return unique(names)


def syntax_variants(text: str, defined: Iterable[str]) -> tuple[str, ...]:
    """Spelled-out variants of the defined names in the section's first code block after "Syntax"
    (``mbarrier.try_wait.parity`` for the ``mbarrier.try_wait`` section)."""
    roots = tuple(d for d in defined if not d.startswith(("%", ".")))
    if not roots:
        return ()
    m = re.search(r"(?:^|\n)Syntax\s*\n+```[^\n]*\n(.*?)\n```", text, re.DOTALL)
    if not m:
        return ()
    found = []
    for line in m.group(1).splitlines():
        lead = re.match(r"\s*([a-z][a-z0-9_]*(?:(?:\.|::)[a-z0-9_]+)*)", line)
        if not lead:
            continue
        name = base_name(lead.group(1))
        if any(name == r or name.startswith(r + ".") for r in roots):
            found.append(name)
    return unique(found)


def names_in_text(text: str, families: Iterable[str] | None = None) -> tuple[str, ...]:
    """Dotted PTX names written in ``text``; with ``families``, only those whose first part is a known
    instruction family (``mbarrier``, ``cp``, ``wgmma``)."""
    fam = set(families) if families is not None else None
    out = []
    for m in _NAME_IN_TEXT.finditer(text):
        name = base_name(m.group(0))
        if "." not in name.lstrip("."):
            continue
        first = name.lstrip("%.").split(".", 1)[0]
        if fam is None or first in fam:
            out.append(name)
    return unique(out)


@dataclass(frozen=True)
class QueryName:
    """A PTX name the query asks about; ``weight`` grows with specificity and with quoting (compiler
    errors quote the offending instruction)."""

    name: str
    weight: float
    bare: bool = False
    """an undotted, unquoted word (``mbarrier``, ``ldmatrix``)"""


def names_in_query(query: str, vocabulary: Iterable[str]) -> list[QueryName]:
    """Names the query asks about: dotted, sigiled or quoted names, and bare names the manual defines
    (``ldmatrix``) unless they are everyday words."""
    vocab = set(vocabulary)
    found: dict[str, QueryName] = {}
    quoted = {base_name(q) for q in re.findall(r"['\"`‘’“”]([^'\"`‘’“”\s]+)['\"`‘’“”]", query)}
    for m in re.finditer(r"[%.]?[A-Za-z][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z0-9_]+)*", query):
        name = base_name(m.group(0))
        if not name or not NAME_RE.match(name):
            continue
        is_quoted = name in quoted
        dotted = "." in name.lstrip("%.")
        sigiled = name[0] in "%."
        if not (dotted or sigiled or is_quoted) and (name not in vocab or name in COMMON_WORD_MNEMONICS):
            continue
        weight = float(name.lstrip("%.").count(".") + 1) + (1.0 if is_quoted else 0.0)
        if name not in found or found[name].weight < weight:
            found[name] = QueryName(name, weight, bare=not (dotted or sigiled or is_quoted))
    return list(found.values())


def _is_family(name: str, defines: Mapping[K, Iterable[str]], owners: list[K]) -> bool:
    """True when sections other than ``owners`` define names of the ``name.`` family."""
    prefix = name + "."
    return any(
        key not in owners and any(d.startswith(prefix) for d in names) for key, names in defines.items()
    )


def match_sections(qnames: Iterable[QueryName], defines: Mapping[K, Iterable[str]]) -> dict[K, float]:
    """Bonus per key of ``defines`` (a section or document id -> names it defines).

    For each query name, the sections that define it exactly score its weight; if none does, the
    sections defining the longest name that the query name is a variant of (``mbarrier.try_wait`` for
    ``mbarrier.try_wait.parity``) score 0.9 x its weight. A family name (``wgmma``, or a bare ``mbarrier``
    that other sections extend) scores nothing: lexical and dense search handle it."""
    bonus: dict[K, float] = {}
    for q in qnames:
        exact = [key for key, names in defines.items() if q.name in names]
        if exact and q.bare and _is_family(q.name, defines, exact):
            continue  # "mbarrier object" is about the family, not the overview section
        if exact:
            for key in exact:
                bonus[key] = bonus.get(key, 0.0) + q.weight
            continue
        best_len = 0
        best: list[K] = []
        for key, names in defines.items():
            for d in names:
                if q.name.startswith(d + ".") and len(d) >= best_len:
                    if len(d) > best_len:
                        best_len, best = len(d), []
                    best.append(key)
        for owner in dict.fromkeys(best):
            bonus[owner] = bonus.get(owner, 0.0) + 0.9 * q.weight
    return bonus
