"""Knowledge documents: contracts, patterns and debug hints (Markdown with front matter), template headers,
rendered hardware cards."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .cards import hardware_card, list_hardware, render_card
from .files import CorpusError, package_dir

Source = Literal["contracts", "patterns", "hints", "templates", "hardware"]
SOURCES: tuple[Source, ...] = ("contracts", "patterns", "hints", "templates", "hardware")

#: Template header per target architecture (the file name under templates/).
TEMPLATE_HEADERS: dict[str, str] = {"sm_90a": "ptxrag_sm90.cuh"}

#: Front-matter keys every contract must have.
REQUIRED_KEYS = ("id", "title", "instructions", "cites")

_SECTION_RE = re.compile(r"^\d+(\.\d+)*$")

#: the id prefix of each Markdown source: ``contract-mbarrier``, ``pattern-tma-store-epilogue``, ...
_ID_PREFIX: dict[str, str] = {"contracts": "contract", "patterns": "pattern", "hints": "hints"}


@dataclass(frozen=True)
class KnowledgeDoc:
    """One document of the knowledge pack."""

    source: Source
    #: stable id, e.g. "contract-mbarrier", "template-ptxrag_sm90", "hw-h200"
    doc_id: str
    title: str
    #: the full text: Markdown body (contracts), header source (templates) or rendered card (hardware)
    text: str
    #: PTX instruction names the document concerns (prefix-matched by ``contracts(instructions=...)``)
    tags: tuple[str, ...]
    path: Path
    #: PTX ISA section numbers the document cites, e.g. "9.7.13.15.16"
    cites: tuple[str, ...]

    def concerns(self, instruction: str) -> bool:
        """True when one of the tags matches ``instruction`` (see ``matches_instruction``)."""
        return any(matches_instruction(tag, instruction) for tag in self.tags)


def matches_instruction(tag: str, instruction: str) -> bool:
    """Dot-boundary prefix match in either direction, case-insensitive.

    ``mbarrier`` matches ``mbarrier.try_wait.parity``; ``cp.async.bulk.tensor`` matches
    ``cp.async.bulk.tensor.2d.shared::cluster.global``; ``cp.async.bulk`` does not match ``cp.async.bulkx``.
    """
    t, q = tag.strip().lower(), instruction.strip().lower()
    if not t or not q:
        return False
    return t == q or q.startswith(t + ".") or t.startswith(q + ".")


# ---- front matter -------------------------------------------------------------------------------------------


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def parse_front_matter(text: str, path: Path) -> tuple[dict[str, str | list[str]], str]:
    """Split ``---``-delimited front matter (``key: value`` or ``key: [a, b]`` lines) from the body."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise CorpusError(f"{path}: must start with a '---' front-matter block")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise CorpusError(f"{path}: front matter is not closed by a '---' line") from None
    meta: dict[str, str | list[str]] = {}
    for n, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[a-z_]+", key):
            raise CorpusError(f"{path}:{n}: expected 'key: value', got {line!r}")
        if key in meta:
            raise CorpusError(f"{path}:{n}: duplicate key {key!r}")
        if value.startswith("["):
            if not value.endswith("]"):
                raise CorpusError(f"{path}:{n}: list for {key!r} must be on one line and end with ']'")
            inner = value[1:-1].strip()
            meta[key] = [_scalar(v) for v in inner.split(",")] if inner else []
        else:
            meta[key] = _scalar(value)
    return meta, "\n".join(lines[end + 1 :]).lstrip("\n")


def _as_list(meta: dict[str, str | list[str]], key: str, path: Path) -> list[str]:
    v = meta[key]
    if not isinstance(v, list):
        raise CorpusError(f"{path}: front-matter {key!r} must be a [list]")
    if any(not x for x in v):
        raise CorpusError(f"{path}: front-matter {key!r} has an empty entry")
    return v


def load_markdown(
    path: Path, source: Source, required: tuple[str, ...] = REQUIRED_KEYS
) -> tuple[KnowledgeDoc, dict[str, str | list[str]]]:
    """Read and validate one Markdown document of ``source`` (contracts, patterns, hints): its id must be
    ``<prefix>-<file name>`` (prefix: contract, pattern, hints), ``instructions`` name at least one PTX
    instruction and ``cites`` are section numbers. Returns the document and its whole front matter."""
    meta, body = parse_front_matter(path.read_text(encoding="utf-8"), path)
    missing = [k for k in required if k not in meta]
    if missing:
        raise CorpusError(f"{path}: front matter lacks {missing}")
    doc_id, title = meta["id"], meta["title"]
    if not isinstance(doc_id, str) or not isinstance(title, str) or not title:
        raise CorpusError(f"{path}: 'id' and 'title' must be plain strings")
    prefix = _ID_PREFIX[source]
    if doc_id != f"{prefix}-{path.stem}":
        raise CorpusError(f"{path}: id {doc_id!r} must be '{prefix}-{path.stem}' (the file name)")
    instructions = _as_list(meta, "instructions", path)
    cites = _as_list(meta, "cites", path)
    if not instructions:
        raise CorpusError(f"{path}: 'instructions' must name at least one PTX instruction")
    bad = [c for c in cites if not _SECTION_RE.match(c)]
    if bad:
        raise CorpusError(f"{path}: cites {bad} are not section numbers like 9.7.13.15.16")
    doc = KnowledgeDoc(source, doc_id, title, body, tuple(instructions), path, tuple(cites))
    return doc, meta


def load_contract(path: Path) -> KnowledgeDoc:
    """Read and validate one contract document."""
    return load_markdown(path, "contracts")[0]


# ---- template headers ---------------------------------------------------------------------------------------

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ASM_RE = re.compile(r"\basm\s*(?:volatile\s*)?\(")
#: first components of the PTX instructions the template tags care about
_PTX_FAMILIES = {
    "mbarrier", "cp", "fence", "wgmma", "ldmatrix", "stmatrix", "elect", "redux", "setmaxnreg",
    "barrier", "mapa", "griddepcontrol", "prefetch", "ld", "st",
}  # fmt: skip
_TYPE_SUFFIX_RE = re.compile(r"(\.(b|u|s|f|bf|e4m3|e5m2)(8|16|32|64|x2)?)+$")


def _asm_strings(source: str) -> Iterator[str]:
    """The PTX text of every asm(...) statement (string literals up to the first operand colon)."""
    for m in _ASM_RE.finditer(source):
        pos, parts = m.end(), []
        while True:
            s = _STRING_RE.match(source, pos)
            ws = re.match(r"\s*", source[pos:])
            if s is None and ws is not None and ws.end() > 0:
                pos += ws.end()
                continue
            if s is None:
                break
            parts.append(s.group(1))
            pos = s.end()
        yield "".join(parts).replace("\\n", "\n").replace("\\t", " ")


def ptx_instructions(source: str) -> list[str]:
    """PTX instruction names used in the asm statements of ``source``, type suffixes dropped, sorted."""
    found: set[str] = set()
    for text in _asm_strings(source):
        for stmt in re.split(r"[;\n{}]", text):
            stmt = re.sub(r"^\s*[A-Za-z_%=0-9]+:", "", stmt).strip()  # labels
            stmt = re.sub(r"^@!?\w+\s+", "", stmt)  # predicate guards
            if not stmt:
                continue
            op = stmt.split()[0]
            head = op.split(".")[0]
            if "." not in op or head not in _PTX_FAMILIES:
                continue
            if head in ("ld", "st") and "::cluster" not in op:
                continue
            found.add(_TYPE_SUFFIX_RE.sub("", op))
    return sorted(found)


def _condense_generated(text: str) -> str:
    """For generated headers (long operand lists): the comment header, wrapper names and the dispatcher."""
    lines = text.splitlines()
    head = [ln for ln in lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("//")), 0)]]
    names = re.findall(r"void (wgmma_m64n\w+)\(", text)
    start = next((i for i, ln in enumerate(lines) if ln.startswith("// Dispatch on N")), None)
    dispatch: list[str] = []
    if start is not None:
        end = next(i for i in range(start, len(lines)) if lines[i] == "}")
        dispatch = lines[start : end + 1]
    listing = "// asm bodies omitted here (see the file); wrappers: " + ", ".join(names)
    return "\n".join([*head, listing, *dispatch])


def _expand(path: Path, seen: set[Path]) -> list[tuple[Path, str]]:
    """The header and, in include order, every header it includes from the templates folder."""
    if path in seen:
        return []
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    out = [(path, text)]
    for inc in _INCLUDE_RE.findall(text):
        target = (path.parent / inc).resolve()
        if target.is_file() and package_dir() in target.parents:
            out += _expand(target, seen)
    return out


def load_template(path: Path) -> KnowledgeDoc:
    """One template header with everything it includes, concatenated (generated parts condensed)."""
    files = _expand(path.resolve(), set())
    root = package_dir() / "templates"
    chunks, tags = [], set()
    for p, text in files:
        tags.update(ptx_instructions(text))
        body = _condense_generated(text) if "GENERATED" in text.splitlines()[0] else text
        chunks.append(f"// ===== {p.relative_to(root.resolve())} =====\n{body.rstrip()}\n")
    cites = sorted(set(re.findall(r"\b(\d+\.\d+(?:\.\d+)+)\b", "".join(t for _, t in files))))
    first = files[0][1].splitlines()[0].lstrip("/ ").strip()
    title = first.split(":", 1)[1].strip() if ":" in first else path.name
    return KnowledgeDoc(
        "templates",
        f"template-{path.stem}",
        title,
        "\n".join(chunks),
        tuple(sorted(tags)),
        path,
        tuple(cites),
    )


# ---- patterns and debug hints -------------------------------------------------------------------------------
#
# A *pattern* (``patterns/*.md``) is a design an expert builds from the instructions (a warp-specialised
# pipeline, a persistent tile scheduler, a multicast load, a TMA-store epilogue, the FA3 attention pipeline):
# numbered steps, each citing the PTX ISA sections it rests on, and the tested files of this repository that
# show it (``shown_by``, paths under the ``ptxrag`` package). Its front matter says which tasks it is for:
# ``requires`` (PTX instructions that must all be among the task's required ones, dot-boundary prefixes) and
# optionally ``families`` (task families, e.g. ``attention``, that it is limited to). *Debug hints*
# (``hints/*.md``) map what the evaluator reports to the contract rules that usually explain it, per target
# architecture (``arch``).

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


# ---- public API ---------------------------------------------------------------------------------------------


def _contract_paths() -> list[Path]:
    d = package_dir() / "contracts"
    return sorted(d.glob("*.md")) if d.is_dir() else []


def iter_documents(sources: Iterable[str] | None = None) -> Iterator[KnowledgeDoc]:
    """Every document of the chosen layers (all by default) in the order of ``SOURCES``, each sorted by id."""
    wanted = list(SOURCES) if sources is None else list(sources)
    unknown = [s for s in wanted if s not in SOURCES]
    if unknown:
        raise CorpusError(f"unknown knowledge source(s) {unknown}; known: {list(SOURCES)}")
    if "contracts" in wanted:
        yield from (load_contract(p) for p in _contract_paths())
    if "patterns" in wanted:
        yield from patterns()
    if "hints" in wanted:
        yield from debug_hints()
    if "templates" in wanted:
        for arch in sorted(TEMPLATE_HEADERS):
            yield template_header(arch)
    if "hardware" in wanted:
        for name in list_hardware():
            card = hardware_card(name)
            path = card.path or package_dir() / "hardware" / f"{name}.toml"
            yield KnowledgeDoc("hardware", f"hw-{name}", card.title, render_card(card), (), path, ())


def contracts(instructions: Iterable[str] | None = None) -> list[KnowledgeDoc]:
    """All contracts, or those whose instruction tags match any of ``instructions`` (dot-boundary prefixes)."""
    docs = [load_contract(p) for p in _contract_paths()]
    if instructions is None:
        return docs
    wanted = [i for i in instructions if i.strip()]
    return [d for d in docs if any(d.concerns(i) for i in wanted)]


def template_header(arch: str = "sm_90a") -> KnowledgeDoc:
    """The PTX template header for ``arch`` (with its included family headers) as one document."""
    name = TEMPLATE_HEADERS.get(arch.strip().lower())
    if name is None:
        raise CorpusError(f"no template header for arch {arch!r}; known: {sorted(TEMPLATE_HEADERS)}")
    path = package_dir() / "templates" / name
    if not path.is_file():
        raise CorpusError(f"{path}: template header is missing from the installed package")
    return load_template(path)
