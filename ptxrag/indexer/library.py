"""Manuals per GPU generation: the shipped list of official manual locations, and the manuals a user has
added (``ptxrag corpus add``), stored parsed and validated under ``<home>/manuals/<source>/<version>/``."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .catalog import Store, now_iso
from .errors import IndexerError, ManualFormatError, ManualNotFoundError
from .limits import MAX_DOWNLOAD_BYTES, DownloadCap, ManualTooLargeError
from .loaders import load_manual
from .schema import KNOWLEDGE_SOURCES, MANUAL_SOURCE, Manual, ManualFormat
from .text import version_key

_VERSION_RE = re.compile(r"^\d+\.\d+$")
_STATED_VERSION = re.compile(r"^PTX ISA Version (\d+\.\d+)\s*$", re.IGNORECASE)


class ManualReplaceRefused(IndexerError):
    """A manual would replace an added one of the same version that is much larger (``--replace`` forces)."""


@dataclass(frozen=True)
class ManualChecks:
    """What a manual must look like before it is stored. The real PTX ISA 9.0 and 9.1 manuals have about
    680 sections, 255 of them defining instructions, and state their version in section 1.3."""

    min_sections: int = 200
    #: sections that define at least one instruction (headings like "... Instructions: mbarrier.init")
    min_instruction_sections: int = 60
    #: the manual must state its version ("PTX ISA Version 9.1", a section 1.x title); a different one is
    #: always refused
    require_stated_version: bool = True
    #: a manual that replaces one of the same version must keep this share of its sections and instructions
    min_replace_fraction: float = 0.8


DEFAULT_CHECKS = ManualChecks()


class OfficialManual(BaseModel):
    """One entry of ``corpus/manuals/ptx-isa.toml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str
    cuda: str
    html: str | None = None
    pdf: str | None = None
    note: str = ""


class ManualRecord(BaseModel):
    """A manual added to this data directory."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source: str
    version: str
    format: ManualFormat
    origin: str
    base_url: str | None = None
    sections: int
    instructions: int = Field(description="distinct instruction names the manual defines")
    architectures: list[str]
    content_sha256: str
    added_at: str


def official_manuals() -> list[OfficialManual]:
    """Known official locations, newest first."""
    text = (resources.files("ptxrag.corpus") / "manuals" / "ptx-isa.toml").read_text(encoding="utf-8")
    entries = [OfficialManual.model_validate(e) for e in tomllib.loads(text).get("manual", [])]
    return sorted(entries, key=lambda e: version_key(e.version), reverse=True)


def official_manual(version: str) -> OfficialManual | None:
    return next((m for m in official_manuals() if m.version == version), None)


def stated_version(manual: Manual) -> str | None:
    """The version a manual states about itself (section 1.3 "PTX ISA Version 9.1")."""
    for s in manual.sections:
        if s.number.count(".") == 1 and s.number.startswith("1."):
            m = _STATED_VERSION.match(s.title.strip())
            if m:
                return m.group(1)
    return None


def _manual_dir(store: Store, source: str, version: str) -> Path:
    return store.manuals_root / source / version


def check_plausible(manual: Manual, version: str, origin: str, checks: ManualChecks = DEFAULT_CHECKS) -> None:
    """A ManualFormatError when ``manual`` does not look like the whole PTX ISA manual of ``version``."""
    said = stated_version(manual)
    if said is not None and said != version:
        raise ManualFormatError(f"{origin} says it is PTX ISA version {said}, not {version}")
    if said is None and checks.require_stated_version:
        raise ManualFormatError(
            f"{origin} does not state its version (no section 1.x titled 'PTX ISA Version {version}'); "
            "is this the PTX ISA manual?"
        )
    n = len(manual.sections)
    n_instr = sum(1 for s in manual.sections if s.defines)
    if n < checks.min_sections or n_instr < checks.min_instruction_sections:
        raise ManualFormatError(
            f"{origin}: {n} numbered sections, {n_instr} of them defining instructions; a whole PTX ISA manual "
            f"has at least {checks.min_sections} and {checks.min_instruction_sections} (9.1: 681 and 257). Is "
            "this the whole manual?"
        )


def _check_replacement(
    old: ManualRecord | None, manual: Manual, origin: str, checks: ManualChecks, replace: bool
) -> None:
    if old is None or replace:
        return
    new_sections = len(manual.sections)
    new_instr = len({d for s in manual.sections for d in s.defines})
    f = checks.min_replace_fraction
    if new_sections < f * old.sections or new_instr < f * old.instructions:
        raise ManualReplaceRefused(
            f"{origin} has {new_sections} sections and {new_instr} instructions; the added {old.source} "
            f"{old.version} has {old.sections} and {old.instructions} (from {old.origin}). Refusing to replace "
            "it with a much smaller manual; pass --replace (replace=True) if that is what you want"
        )


def _download(url: str, dest_dir: Path, max_bytes: int = MAX_DOWNLOAD_BYTES) -> Path:
    import httpx

    name = url.rstrip("/").rsplit("/", 1)[-1] or "index.html"
    if "." not in name:
        name += ".html"
    dest = dest_dir / name
    cap = DownloadCap(url, max_bytes)
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as r:
            r.raise_for_status()
            cap.announce(r.headers.get("content-length"))
            with dest.open("wb") as f:
                for block in r.iter_bytes():  # decoded bytes: a compressed bomb is capped too
                    cap.add(len(block))
                    f.write(block)
    except ManualTooLargeError:
        dest.unlink(missing_ok=True)
        raise
    except httpx.HTTPError as e:
        raise IndexerError(
            f"cannot download {url}: {e}. Offline, download the manual elsewhere and pass the file or a "
            "folder of Markdown sections with --from."
        ) from e
    return dest


def add_manual(
    origin: str | Path | None,
    *,
    version: str,
    source: str = MANUAL_SOURCE,
    home: Path | None = None,
    fmt: ManualFormat | None = None,
    base_url: str | None = None,
    replace: bool = False,
    checks: ManualChecks = DEFAULT_CHECKS,
) -> ManualRecord:
    """Read a manual (file, folder, URL, or ``None`` for the official location of ``version``), check it
    and store it parsed. Nothing is written unless the whole manual reads cleanly and looks like a whole
    manual of that version (``checks``); a much smaller manual does not replace an added one of the same
    version unless ``replace``. A replaced manual is kept (``.<version>.previous``) until ``build_index``
    has indexed the new one."""
    if not _VERSION_RE.match(version):
        raise IndexerError(f"version {version!r} is not of the form MAJOR.MINOR (e.g. 9.1)")
    store = Store(home)
    official = official_manual(version) if source == MANUAL_SOURCE else None
    if base_url is None and official is not None:
        base_url = official.html
    with tempfile.TemporaryDirectory(prefix="ptxrag-manual-") as tmp:
        if origin is None:
            if official is None or not (official.html or official.pdf):
                raise ManualNotFoundError(
                    f"no official location is known for {source} {version}; pass --from FILE-OR-URL"
                )
            origin = official.html or official.pdf
        origin_s = str(origin)
        if origin_s.startswith(("http://", "https://")):
            path = _download(origin_s, Path(tmp))
        else:
            path = Path(origin_s).expanduser()
        manual = load_manual(path, version=version, fmt=fmt, base_url=base_url, source=source)
    check_plausible(manual, version, origin_s, checks)
    _check_replacement(_record(store, source, version), manual, origin_s, checks, replace)
    payload = manual.model_dump_json()
    record = ManualRecord(
        source=source,
        version=version,
        format=manual.format,
        origin=origin_s,
        base_url=base_url,
        sections=len(manual.sections),
        instructions=len({d for s in manual.sections for d in s.defines}),
        architectures=manual.architectures(),
        content_sha256=hashlib.sha256(payload.encode("utf-8")).hexdigest(),
        added_at=now_iso(),
    )
    final = _manual_dir(store, source, version)
    staging = final.parent / f".{version}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "manual.json").write_text(payload, encoding="utf-8")
    (staging / "record.json").write_text(record.model_dump_json(indent=2), encoding="utf-8")
    previous = _previous_dir(store, source, version)
    if final.exists():
        if previous.exists():  # an earlier replacement not indexed yet: that one is the indexed copy, keep it
            shutil.rmtree(final)
        else:
            final.rename(previous)
    staging.rename(final)
    return record


def _previous_dir(store: Store, source: str, version: str) -> Path:
    return store.manuals_root / source / f".{version}.previous"


def _record(store: Store, source: str, version: str) -> ManualRecord | None:
    path = _manual_dir(store, source, version) / "record.json"
    if not path.is_file():
        return None
    return ManualRecord.model_validate_json(path.read_text(encoding="utf-8"))


def previous_record(
    version: str, *, source: str = MANUAL_SOURCE, home: Path | None = None
) -> ManualRecord | None:
    """The manual a ``corpus add`` replaced, while it is kept (until the new one is indexed)."""
    path = _previous_dir(Store(home), source, version) / "record.json"
    if not path.is_file():
        return None
    return ManualRecord.model_validate_json(path.read_text(encoding="utf-8"))


def forget_previous(version: str, *, source: str = MANUAL_SOURCE, home: Path | None = None) -> None:
    """Drop the kept previous manual of ``version`` (``build_index`` calls it once the new one is indexed)."""
    shutil.rmtree(_previous_dir(Store(home), source, version), ignore_errors=True)


def list_added(home: Path | None = None, source: str | None = None) -> list[ManualRecord]:
    """Added manuals, by source then newest version first."""
    store = Store(home)
    out: list[ManualRecord] = []
    if not store.manuals_root.is_dir():
        return out
    for rec_path in sorted(store.manuals_root.glob("*/*/record.json")):
        if rec_path.parent.name.startswith("."):
            continue
        rec = ManualRecord.model_validate_json(rec_path.read_text(encoding="utf-8"))
        if source is None or rec.source == source:
            out.append(rec)
    return sorted(out, key=lambda r: (r.source, [-x for x in version_key(r.version)]))


def load_added(version: str, *, source: str = MANUAL_SOURCE, home: Path | None = None) -> Manual:
    path = _manual_dir(Store(home), source, version) / "manual.json"
    if not path.is_file():
        known = ", ".join(r.version for r in list_added(home, source)) or "none"
        raise ManualNotFoundError(
            f"{source} {version} is not added (added: {known}); add it with "
            f"`ptxrag corpus add {source} --version {version} --from PATH`"
        )
    return Manual.model_validate_json(path.read_text(encoding="utf-8"))


def remove_added(version: str, *, source: str = MANUAL_SOURCE, home: Path | None = None) -> None:
    store = Store(home)
    final = _manual_dir(store, source, version)
    if not final.exists():
        raise ManualNotFoundError(f"{source} {version} is not added")
    shutil.rmtree(final)
    shutil.rmtree(_previous_dir(store, source, version), ignore_errors=True)


def manual_file(record: ManualRecord, home: Path | None = None) -> Path:
    return _manual_dir(Store(home), record.source, record.version) / "manual.json"


def index_warnings(
    home: Path | None = None, *, version: str | None = None, sources: list[str] | None = None
) -> list[str]:
    """What a search would silently miss: collections it should search that are missing or empty.

    A manual added but not indexed (or replaced and not re-indexed), no manual indexed at all, a knowledge
    source missing, a collection with no sections or whose files are gone. Empty when all is well or when
    there is no index (the retriever then raises its own clear error)."""
    store = Store(home)
    manifest = store.manifest()
    if not manifest.collections:
        return []
    wanted = set(sources) if sources else {MANUAL_SOURCE, *KNOWLEDGE_SOURCES}
    out: list[str] = []
    entries = list(manifest.collections.values())
    if MANUAL_SOURCE in wanted:
        indexed = {e.version for e in entries if e.source == MANUAL_SOURCE}
        if not indexed:
            out.append(
                "no PTX manual is indexed: hits come from the knowledge pack only "
                "(`ptxrag corpus add ptx-isa --version V --from PATH`, then `ptxrag index`)"
            )
        for rec in list_added(home, MANUAL_SOURCE):
            if version is not None and rec.version != version:
                continue
            if rec.version not in indexed:
                out.append(f"{rec.source} {rec.version} is added but not indexed: run `ptxrag index`")
            elif previous_record(rec.version, home=home) is not None:
                out.append(
                    f"{rec.source} {rec.version} was replaced and the index still holds the previous copy: "
                    "run `ptxrag index`"
                )
    for source in sorted(wanted - {MANUAL_SOURCE}):
        if not any(e.source == source for e in entries):
            out.append(f"the knowledge source {source!r} is not indexed: run `ptxrag index`")
    for e in entries:
        if e.source not in wanted or (
            version is not None and e.source == MANUAL_SOURCE and e.version != version
        ):
            continue
        files = store.lexical_dir(e.physical) / "sections.jsonl"
        if e.sections == 0 or e.chunks == 0:
            out.append(
                f"{e.source} {e.version} is indexed but empty (0 sections): run `ptxrag index --force`"
            )
        elif not files.is_file() or files.stat().st_size == 0:
            out.append(f"{e.source} {e.version}: its index files are missing; run `ptxrag index`")
    return out
