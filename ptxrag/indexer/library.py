"""Manuals per GPU generation: the shipped list of official manual locations, and the manuals a user has
added (``ptxrag corpus add``), stored parsed and validated under ``<home>/manuals/<source>/<version>/``."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .catalog import Store, now_iso
from .errors import IndexerError, ManualFormatError, ManualNotFoundError
from .loaders import load_manual
from .schema import MANUAL_SOURCE, Manual, ManualFormat
from .text import version_key

_VERSION_RE = re.compile(r"^\d+\.\d+$")
_STATED_VERSION = re.compile(r"^PTX ISA Version (\d+\.\d+)\s*$", re.IGNORECASE)


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


def _download(url: str, dest_dir: Path) -> Path:
    import httpx

    name = url.rstrip("/").rsplit("/", 1)[-1] or "index.html"
    if "." not in name:
        name += ".html"
    dest = dest_dir / name
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as r:
            r.raise_for_status()
            with dest.open("wb") as f:
                for block in r.iter_bytes():
                    f.write(block)
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
) -> ManualRecord:
    """Read a manual (file, folder, URL, or ``None`` for the official location of ``version``), check it
    and store it parsed. Nothing is written unless the whole manual reads cleanly."""
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
    said = stated_version(manual)
    if said is not None and said != version:
        raise ManualFormatError(f"{origin_s} says it is PTX ISA version {said}, not {version}")
    if len(manual.sections) < 3:
        raise ManualFormatError(
            f"{origin_s}: only {len(manual.sections)} numbered section(s) found; is this the whole manual?"
        )
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
    old = final.parent / f".{version}.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return record


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
    final = _manual_dir(Store(home), source, version)
    if not final.exists():
        raise ManualNotFoundError(f"{source} {version} is not added")
    shutil.rmtree(final)


def manual_file(record: ManualRecord, home: Path | None = None) -> Path:
    return _manual_dir(Store(home), record.source, record.version) / "manual.json"
