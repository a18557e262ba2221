"""The PTX-to-SASS opcode table (sandbox/data/opcodes.toml) and SASS line parsing."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

from ptxrag.base.errors import TaskInputError

_PRED_RE = re.compile(r"^@!?U?P[0-9T]+\s+")


@dataclass(frozen=True)
class OpcodeRow:
    ptx: str
    sass: tuple[str, ...]
    probe: str | None = None
    verifiable: bool = True
    note: str = ""
    #: "remove", "zero-result", "release" or "none: <reason>" (sandbox/mutation.py)
    mutation: str = "none: no mutation declared"
    #: "work" (copies, MMAs, reductions: the token-use minimum applies) or "any: <reason>" (synchronisation and
    #: ordering: how many threads execute it is the kernel's choice, so only "> 0" applies)
    count: str = "work"

    def matches(self, opcode: str) -> bool:
        return any(re.match(p, opcode) for p in self.sass)


class UnknownInstruction(TaskInputError, KeyError):
    """A requirement names no row of the opcode table."""


@functools.cache
def table() -> tuple[OpcodeRow, ...]:
    text = (resources.files("ptxrag.sandbox") / "data" / "opcodes.toml").read_text()
    rows = tomllib.loads(text)["row"]
    return tuple(
        OpcodeRow(
            r["ptx"],
            tuple(r.get("sass", [])),
            r.get("probe"),
            r.get("verifiable", True),
            r.get("note", ""),
            r.get("mutation", "none: no mutation declared"),
            r.get("count", "work"),
        )
        for r in rows
    )


@dataclass(frozen=True)
class Requirement:
    """A required PTX instruction resolved to the rows (and SASS patterns) that prove it."""

    ptx: str
    rows: tuple[OpcodeRow, ...]

    @property
    def patterns(self) -> list[str]:
        return [p for r in self.rows for p in r.sass]

    @property
    def verifiable(self) -> bool:
        return any(r.verifiable and r.sass for r in self.rows)

    def matches(self, opcode: str) -> bool:
        return any(r.matches(opcode) for r in self.rows)

    @property
    def counts_work(self) -> bool:
        """Whether its predicated-on count measures work (so a token-use minimum applies to it)."""
        return any(r.count == "work" for r in self.rows)


def resolve(ptx: str) -> Requirement:
    """Exact row first; otherwise every row whose name extends ``ptx`` (e.g. "cp.async.bulk.tensor")."""
    rows = table()
    exact = tuple(r for r in rows if r.ptx == ptx)
    if exact:
        return Requirement(ptx, exact)
    pref = tuple(r for r in rows if r.ptx.startswith(ptx + "."))
    if pref:
        return Requirement(ptx, pref)
    known = ", ".join(sorted({r.ptx for r in rows}))
    raise UnknownInstruction(f"{ptx!r} is not in the opcode table; known: {known}")


def opcode_of(sass_text: str) -> str:
    """'@!P1 REDUX.MAX UR8, R2 ;' -> 'REDUX.MAX'."""
    s = _PRED_RE.sub("", sass_text.strip())
    return s.split(" ", 1)[0].rstrip(";")


def is_predicated(sass_text: str) -> bool:
    return bool(_PRED_RE.match(sass_text.strip()))
