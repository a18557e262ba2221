"""Bad input never loses a manual (issue 16): plausibility checks, no silent replacement by a much smaller
manual, the previous copy kept until the new one is indexed, size caps, `ask` warnings, progress on every
stage, and the leftovers of a killed build cleaned by the next one."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.base.errors import ManualInputError
from ptxrag.cli import app
from ptxrag.indexer.build import BUILD_MARKER, build_index
from ptxrag.indexer.catalog import Store
from ptxrag.indexer.errors import ManualFormatError
from ptxrag.indexer.library import (
    ManualChecks,
    ManualReplaceRefused,
    _download,
    add_manual,
    index_warnings,
    list_added,
    previous_record,
)
from ptxrag.indexer.limits import MAX_SECTION_CHARS, ManualTooLargeError, MiB
from ptxrag.indexer.loaders import load_manual

FIXTURES = Path(__file__).parent / "fixtures" / "manuals"
MINI_HTML = FIXTURES / "ptx-isa-mini.html"
MINI_CHECKS = ManualChecks(min_sections=1, min_instruction_sections=1)
runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _add(home: Path, origin: Path, version: str = "9.1", *extra: str) -> object:
    return runner.invoke(
        app,
        ["corpus", "add", "ptx-isa", "--version", version, "--from", str(origin), *extra],
        env={"PTXRAG_HOME": str(home)},
    )


@pytest.fixture
def real_home(tmp_path: Path, shared_dir: Path) -> Path:
    """The whole 9.1 manual added (not indexed)."""
    home = tmp_path / "home"
    res = _add(home, shared_dir / "corpus" / "ptx-isa-9.1")
    assert res.exit_code == 0, res.output
    return home


# -- plausibility --------------------------------------------------------------------------------------
def test_an_unrelated_page_with_numbered_headings_does_not_replace_the_manual(
    real_home: Path, tmp_path: Path
):
    page = tmp_path / "blog.html"
    page.write_text(
        "<html><body><h2>1. Intro</h2><p>a</p><h2>2. Setup</h2><p>b</p><h2>3. Results</h2><p>c</p></body></html>"
    )
    res = _add(real_home, page)
    assert res.exit_code == 2, res.output
    assert "does not state its version" in _flat(res.output)
    (rec,) = list_added(real_home)
    assert rec.sections == 681  # the real manual is untouched


def test_a_page_that_states_the_version_but_is_not_a_manual_is_refused(tmp_path: Path):
    page = tmp_path / "fake.html"
    page.write_text(
        "<html><body><h2>1. Introduction</h2><p>x</p><h3>1.3. PTX ISA Version 9.1</h3><p>y</p>"
        "<h2>9. Instruction Set</h2><p>z</p></body></html>"
    )
    res = _add(tmp_path / "home", page)
    assert res.exit_code == 2, res.output
    assert "3 numbered sections" in _flat(res.output) and "at least 200" in _flat(res.output)
    assert list_added(tmp_path / "home") == []


def test_a_subset_replaces_the_manual_only_with_replace(real_home: Path, tmp_path: Path, shared_dir: Path):
    subset = tmp_path / "subset"  # 418 sections: plausible alone, much smaller than the 681 it would replace
    for part in ("1_introduction", "9_instruction_set"):
        shutil.copytree(shared_dir / "corpus" / "ptx-isa-9.1" / part, subset / part)
    res = _add(real_home, subset)
    assert res.exit_code == 2, res.output
    assert "Refusing to replace" in _flat(res.output) and "--replace" in _flat(res.output)
    assert list_added(real_home)[0].sections == 681
    with pytest.raises(ManualReplaceRefused) as refused:  # the library says the same
        add_manual(subset, version="9.1", home=real_home)
    assert isinstance(refused.value, ManualInputError)
    res = _add(real_home, subset, "9.1", "--replace")
    assert res.exit_code == 0, res.output
    assert "previous ptx-isa 9.1 (681 sections" in _flat(res.output)
    assert list_added(real_home)[0].sections == 418
    prev = previous_record("9.1", home=real_home)
    assert prev is not None and prev.sections == 681
    res = runner.invoke(app, ["corpus", "remove", "9.1"], env={"PTXRAG_HOME": str(real_home)})
    assert res.exit_code == 0 and previous_record("9.1", home=real_home) is None  # removed means both copies


def test_plausibility_errors_are_manual_input_errors(tmp_path: Path):
    with pytest.raises(ManualInputError):
        add_manual(MINI_HTML, version="9.1", home=tmp_path)  # 8 sections with the default checks
    with pytest.raises(ManualFormatError, match="says it is PTX ISA version 9.1"):
        add_manual(MINI_HTML, version="9.0", home=tmp_path, checks=MINI_CHECKS)


# -- size caps -----------------------------------------------------------------------------------------
def test_a_huge_section_is_refused_before_indexing(tmp_path: Path):
    md = tmp_path / "m" / "big.md"
    md.parent.mkdir()
    md.write_text("## 9.7.1. Huge\n\n" + ("word " * (MAX_SECTION_CHARS // 5 + 10)) + "\n")
    with pytest.raises(ManualTooLargeError, match=r"section 9\.7\.1 has .* over the 1\.0 MiB"):
        load_manual(md.parent, version="9.1")


def test_a_huge_markdown_file_is_refused_before_reading(tmp_path: Path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "ok.md").write_text("## 1.1. Fine\n\ntext\n")
    with (folder / "huge.md").open("wb") as f:
        f.truncate(17 * MiB)  # sparse: costs no disk and no time
    with pytest.raises(ManualTooLargeError, match="huge.md: 17.0 MiB"):
        load_manual(folder, version="9.1")


@pytest.mark.parametrize("name", ["manual.pdf", "manual.html"])
def test_a_huge_manual_file_is_refused_before_parsing(tmp_path: Path, name: str):
    path = tmp_path / name
    with path.open("wb") as f:
        f.write(b"%PDF-1.7\n" if name.endswith(".pdf") else b"<html>")
        f.truncate(65 * MiB)
    with pytest.raises(ManualTooLargeError, match="65.0 MiB, over the 64.0 MiB"):
        add_manual(path, version="9.1", home=tmp_path / "home")
    assert list_added(tmp_path / "home") == []


class _Endless(http.server.BaseHTTPRequestHandler):
    sent = 0

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.send_response(200)
        if self.path == "/announced.html":
            self.send_header("Content-Length", str(150 * MiB))
            self.end_headers()
            return
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        block = b"<p>" + b"x" * (64 * 1024) + b"</p>"
        try:
            for _ in range(160):  # bounded: about 10 MiB if nothing stops it
                self.wfile.write(block)
                type(self).sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_a_download_is_cut_off_at_its_cap(tmp_path: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ManualTooLargeError, match="more than 1.0 MiB received"):
            _download(f"{base}/manual.html", tmp_path, max_bytes=1 * MiB)
        assert not (tmp_path / "manual.html").exists()
        with pytest.raises(ManualTooLargeError, match="announces 150.0 MiB"):
            _download(f"{base}/announced.html", tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert _Endless.sent < 10 * MiB  # it stopped reading long before the end


# -- index: previous copy, warnings, progress, killed builds -----------------------------------------------
@pytest.fixture
def mini_home(tmp_path: Path) -> Path:
    home = tmp_path / "mini"
    add_manual(MINI_HTML, version="9.1", home=home, checks=MINI_CHECKS)
    labels: list[str] = []
    build_index(home, knowledge=False, progress=lambda label, done, total: labels.append(label))
    for stage in ("loading model", "reading sections", "chunking", "embedding", "storing", "BM25 index"):
        assert any(stage in label for label in labels), (stage, labels)
    return home


def test_previous_manual_is_kept_until_the_new_one_is_indexed_and_ask_warns(mini_home: Path, tmp_path: Path):
    changed = tmp_path / "changed.html"
    changed.write_text(MINI_HTML.read_text(encoding="utf-8").replace("no ordering", "no ordering at all"))
    add_manual(changed, version="9.1", home=mini_home, checks=MINI_CHECKS)
    assert previous_record("9.1", home=mini_home) is not None
    nine = tmp_path / "nine.html"
    nine.write_text(
        MINI_HTML.read_text(encoding="utf-8").replace("PTX ISA Version 9.1", "PTX ISA Version 9.0")
    )
    add_manual(nine, version="9.0", home=mini_home, checks=MINI_CHECKS)
    res = runner.invoke(app, ["ask", "mbarrier.try_wait", "--json"], env={"PTXRAG_HOME": str(mini_home)})
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)  # the warnings go to stderr, stdout stays JSON
    err = _flat(res.stderr)
    assert "ptx-isa 9.0 is added but not indexed" in err
    assert "9.1 was replaced and the index still holds the previous copy" in err
    assert "'contracts' is not indexed" in err
    build_index(mini_home, knowledge=False, versions=["9.1"])
    assert previous_record("9.1", home=mini_home) is None  # indexed: the old copy is gone
    store = Store(mini_home)
    (entry,) = [e for e in store.manifest().collections.values() if e.version == "9.1"]
    (store.lexical_dir(entry.physical) / "sections.jsonl").unlink()
    warnings = index_warnings(mini_home, sources=["ptx-isa"])
    assert any("9.1: its index files are missing" in w for w in warnings), warnings


KILLER = r"""
import os, signal, sys
from pathlib import Path
from ptxrag.indexer.build import build_index
def die(label, done, total):
    if "storing" in label:
        os.kill(os.getpid(), signal.SIGKILL)  # a kill -9 half way: the collection exists, the manifest does not name it
build_index(Path(sys.argv[1]), knowledge=False, force=True, progress=die)
"""


def test_leftovers_of_a_killed_build_are_cleaned_by_the_next(mini_home: Path, tmp_path: Path):
    store = Store(mini_home)
    before = {e.physical for e in store.manifest().collections.values()}
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run(
        [sys.executable, str(script), str(mini_home)], env=env, capture_output=True, timeout=300
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert (store.index_dir / BUILD_MARKER).exists()
    names = {c.name for c in Store(mini_home).client().list_collections()}
    assert names - before, "the killed build left no collection: this test would prove nothing"
    report = build_index(mini_home, knowledge=False)
    assert [c.action for c in report.collections] == ["unchanged"]
    assert any("interrupted build" in s for s in report.skipped), report.skipped
    fresh = Store(mini_home)
    assert {c.name for c in fresh.client().list_collections()} == before
    assert {p.name for p in fresh.lexical_root.iterdir()} == before
    assert not (fresh.index_dir / BUILD_MARKER).exists()
    segments = [p for p in fresh.chroma_dir.iterdir() if p.is_dir()]
    assert len(segments) <= len(before)


def test_ask_has_no_warning_when_every_collection_is_there(tmp_path: Path):
    from ptxrag.indexer.catalog import CollectionEntry, IndexManifest, collection_key

    store = Store(tmp_path)
    entries = {}
    from ptxrag.indexer.schema import KNOWLEDGE_SOURCES

    for source, version in (("ptx-isa", "9.1"), *((s, "bundled") for s in KNOWLEDGE_SOURCES)):
        physical = f"{source}-{version}-0000"
        store.write_records(store.lexical_dir(physical), [], [])
        (store.lexical_dir(physical) / "sections.jsonl").write_text("{}\n")
        entries[collection_key(source, version)] = CollectionEntry(
            source=source,
            version=version,
            physical=physical,
            content_sha256="x",
            chunking={},
            model={},
            sections=3,
            chunks=3,
            built_at="now",
        )
    store.write_manifest(IndexManifest(model={}, collections=entries))
    assert index_warnings(tmp_path) == []
    empty = entries[collection_key("contracts", "bundled")].model_copy(update={"sections": 0, "chunks": 0})
    store.write_manifest(
        IndexManifest(model={}, collections={**entries, collection_key("contracts", "bundled"): empty})
    )
    assert index_warnings(tmp_path) == [
        "contracts bundled is indexed but empty (0 sections): run `ptxrag index --force`"
    ]
