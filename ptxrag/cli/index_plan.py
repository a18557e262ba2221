"""What ``ptxrag index`` is about to do, said before it starts: which added manuals it will index (new,
changed, or unchanged and skipped), the knowledge pack, and about how long, so a user who needs one manual
learns of ``--version`` before waiting for all of them. Reads only the records and the manifest (no torch,
no Chroma)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: measured: PTX ISA 9.1 (681 sections; 2,248 chunks) plus the knowledge pack indexed from scratch in 104.7 s
#: on 2 cores at load 2 (docs/retrieval.md, 2026-12-04); the embedding model's load is part of it
SECONDS_PER_SECTION = 104.7 / 681


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def index_plan(
    home: Path | None, versions: Sequence[str] | None, *, force: bool, knowledge: bool, model: str | None
) -> list[str]:
    """Lines that say what a build with these arguments will index, and the estimated time."""
    from ptxrag.indexer.catalog import Store, collection_key
    from ptxrag.indexer.library import list_added
    from ptxrag.indexer.schema import BUNDLED_VERSION, MANUAL_SOURCE

    added = list_added(home, MANUAL_SOURCE)
    chosen = [r for r in added if versions is None or r.version in versions]
    manifest = Store(home).manifest()
    built = manifest.model or {}
    other_model = model is not None and model not in (built.get("name"), built.get("location"))
    lines: list[str] = []
    total_s = 0.0
    for rec in chosen:
        entry = manifest.collections.get(collection_key(rec.source, rec.version))
        if entry is None:
            why = "not indexed yet"
        elif force:
            why = "rebuilt (--force)"
        elif other_model:
            why = f"rebuilt for model {model}"
        elif entry.content_sha256 != rec.content_sha256:
            why = "changed since it was indexed"
        else:
            lines.append(
                f"{rec.source} {rec.version} ({rec.sections} sections): indexed and unchanged, skipped"
            )
            continue
        seconds = rec.sections * SECONDS_PER_SECTION
        total_s += seconds
        lines.append(
            f"{rec.source} {rec.version} ({rec.sections} sections): {why}, about {_duration(seconds)}"
        )
    if not added:
        lines.append("no manual added: only the knowledge pack (`ptxrag corpus add ptx-isa ...` adds one)")
    elif not chosen:
        lines.append(f"no added manual is of version {', '.join(versions or [])}")
    if knowledge:
        packed = any(e.version == BUNDLED_VERSION for e in manifest.collections.values())
        lines.append(
            "knowledge pack (contracts, templates, hardware cards, patterns, hints): "
            + ("rebuilt only where it changed" if packed and not force and not other_model else
               f"{'not indexed yet' if not packed else 'rebuilt'}, under a minute (28 s at load 1 before patterns and hints joined it)")
        )  # fmt: skip
    if versions is None and len(added) > 1:
        newest = added[0].version
        lines.append(
            f"all {len(added)} added manuals are indexed; a study needs the one of its GPU's generation: "
            f"`ptxrag index --version {newest}` indexes only that one"
        )
    if total_s:
        lines.append(
            f"estimated: about {_duration(total_s)} on 2 idle cores (PTX ISA 9.1 took 105 s), longer on a "
            "busy machine"
        )
    return [f"index: {x}" for x in lines]
