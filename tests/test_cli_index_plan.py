"""``ptxrag index`` says what it will index and about how long before it starts: each added manual new,
changed or unchanged (skipped), the knowledge pack, the hint that --version indexes only one, an estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.cli import app
from ptxrag.cli.index_plan import SECONDS_PER_SECTION, index_plan
from ptxrag.indexer import IndexerError, add_manual, list_added
from ptxrag.indexer.catalog import CollectionEntry, IndexManifest, Store, collection_key
from ptxrag.indexer.library import ManualChecks

MINI_HTML = Path(__file__).parent / "fixtures" / "manuals" / "ptx-isa-mini.html"
#: the mini manual has 8 sections (the whole-manual minimums are tested in test_indexer_hardening.py)
CHECKS = ManualChecks(min_sections=1, min_instruction_sections=1)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Two added manuals; 9.1 indexed (a manifest entry with its content hash), 9.0 not."""
    home = tmp_path / "home"
    add_manual(MINI_HTML, version="9.1", home=home, checks=CHECKS)
    older = tmp_path / "ptx-isa-mini-9.0.html"  # the same sections, stating version 9.0
    older.write_text(MINI_HTML.read_text(encoding="utf-8").replace("9.1", "9.0"), encoding="utf-8")
    add_manual(older, version="9.0", home=home, checks=CHECKS)
    rec = next(r for r in list_added(home) if r.version == "9.1")
    entry = CollectionEntry(
        source=rec.source, version=rec.version, physical="x", content_sha256=rec.content_sha256, chunking={},
        model={"name": "all-MiniLM-L6-v2"}, sections=rec.sections, chunks=9, built_at="2026-12-04T00:00:00+00:00",
    )  # fmt: skip
    Store(home).write_manifest(
        IndexManifest(
            model={"name": "all-MiniLM-L6-v2"}, collections={collection_key("ptx-isa", "9.1"): entry}
        )
    )
    return home


def test_the_plan_names_new_and_unchanged_manuals_the_version_hint_and_an_estimate(home):
    lines = index_plan(home, None, force=False, knowledge=True, model=None)
    text = "\n".join(lines)
    assert all(x.startswith("index: ") for x in lines)
    assert "ptx-isa 9.1 (8 sections): indexed and unchanged, skipped" in text
    assert f"ptx-isa 9.0 (8 sections): not indexed yet, about {8 * SECONDS_PER_SECTION:.0f} s" in text
    assert "all 2 added manuals are indexed" in text and "`ptxrag index --version 9.1`" in text
    assert "knowledge pack (contracts, templates, hardware cards, patterns, hints): not indexed yet" in text
    assert "estimated: about 1 s" in text
    only = "\n".join(index_plan(home, ["9.1"], force=False, knowledge=False, model=None))
    assert "9.0" not in only and "--version" not in only and "estimated" not in only  # nothing to build
    forced = "\n".join(index_plan(home, ["9.1"], force=True, knowledge=False, model=None))
    assert "ptx-isa 9.1 (8 sections): rebuilt (--force)" in forced
    other = "\n".join(index_plan(home, ["9.1"], force=False, knowledge=False, model="/models/bge-small"))
    assert "rebuilt for model /models/bge-small" in other
    assert "no added manual is of version 8.8" in "\n".join(
        index_plan(home, ["8.8"], force=False, knowledge=True, model=None)
    )


def test_an_indexed_pack_is_rebuilt_only_where_it_changed(home):
    store = Store(home)
    manifest = store.manifest()
    pack = next(iter(manifest.collections.values())).model_copy(
        update={"source": "contracts", "version": "bundled"}
    )
    store.write_manifest(
        manifest.model_copy(update={"collections": {**manifest.collections, "contracts@bundled": pack}})
    )
    (line,) = [x for x in index_plan(home, ["9.1"], force=False, knowledge=True, model=None) if "pack" in x]
    assert line.endswith("rebuilt only where it changed")
    (line,) = [x for x in index_plan(home, ["9.1"], force=True, knowledge=True, model=None) if "pack" in x]
    assert "rebuilt, under a minute" in line


def test_a_changed_manual_is_announced_as_changed(home):
    add_manual(MINI_HTML, version="9.1", home=home, checks=CHECKS, base_url="https://example.org/ptx/")
    (line,) = [
        x for x in index_plan(home, ["9.1"], force=False, knowledge=False, model=None) if "ptx-isa 9.1" in x
    ]
    assert "changed since it was indexed" in line


def test_ptxrag_index_prints_the_plan_before_building(home, monkeypatch):
    monkeypatch.setenv("PTXRAG_HOME", str(home))
    from ptxrag.indexer import build as build_module

    def refuse(*_a: object, **_k: object) -> None:
        raise IndexerError("stopped before building")

    monkeypatch.setattr(build_module, "build_index", refuse)
    res = CliRunner().invoke(app, ["index"])
    assert res.exit_code == 2
    out = res.output
    assert out.index("index: ptx-isa 9.0 (8 sections): not indexed yet") < out.index(
        "stopped before building"
    )
