"""The packaged retrieval evaluation sets, their split, per-category and contract scoring, and the
chunk-BM25 baseline and fusion ablations (on a small real index)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ptxrag.indexer import Retriever, add_manual, build_index
from ptxrag.indexer.baselines import ABLATION_NAMES, ChunkBM25, searcher, windows
from ptxrag.indexer.errors import IndexerError
from ptxrag.indexer.evaluation import EvalQuery, evaluate, load_queries, packaged_set, select
from ptxrag.indexer.library import ManualChecks
from ptxrag.indexer.schema import Hit

#: the 8-section test manual is far below a whole manual: relaxed plausibility checks
MINI_CHECKS = ManualChecks(min_sections=1, min_instruction_sections=1)

MINI_HTML = Path(__file__).parent / "fixtures" / "manuals" / "ptx-isa-mini.html"
EVAL_DIR = Path(__file__).parent.parent / "eval" / "retrieval"


def _hit(number: str, source: str = "ptx-isa") -> Hit:
    return Hit(
        section_number=number,
        title=number,
        version="9.1",
        source=source,
        url=None,
        score=1.0,
        text="",
        breadcrumb=number,
    )


class _Scripted:
    """Fixed answers per (query, sources)."""

    def __init__(self, manual: dict[str, list[str]], mixed: dict[str, list[tuple[str, str]]]) -> None:
        self.manual, self.mixed = manual, mixed

    def search(self, query: str, k: int = 5, *, version=None, sources=None) -> list[Hit]:  # type: ignore[no-untyped-def]
        if sources == ["ptx-isa"]:
            return [_hit(n) for n in self.manual[query][:k]]
        return [_hit(n, s) for n, s in self.mixed[query][:k]]


@pytest.mark.parametrize(("version", "least"), [("9.1", 300), ("9.0", 40)])
def test_packaged_sets_are_large_categorised_and_split_by_query_hash(version: str, least: int) -> None:
    qs = load_queries(packaged_set(version))
    assert len(qs) >= least
    assert len({q.query for q in qs}) == len(qs)
    assert all(q.category and q.split in ("dev", "test") and q.id for q in qs)
    for q in qs:  # the split is a function of the query text alone
        dev = int(hashlib.sha256(q.query.encode()).hexdigest()[:8], 16) % 100 < 40
        assert q.split == ("dev" if dev else "test"), q.query
    dev_share = sum(q.split == "dev" for q in qs) / len(qs)
    assert 0.3 < dev_share < 0.5
    assert len(select(qs, "dev")) + len(select(qs, "test")) == len(qs)


def test_91_set_covers_the_issue_categories_and_records_title_overlap() -> None:
    path = packaged_set("9.1")
    cats = {q.category for q in load_queries(path)}
    assert cats >= {
        "concept",
        "which",
        "compiler-error",
        "state",
        "memory",
        "tensormap",
        "history",
        "contract",
    }
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(0.0 <= r["title_overlap"] <= 1.0 for r in rows)
    assert all(r["contract"].startswith("contract-") for r in rows if r["category"] == "contract")


def test_compiler_error_queries_are_the_harvested_texts() -> None:
    harvested = json.loads((EVAL_DIR / "compiler-errors.json").read_text())
    assert "13.0" in harvested["nvcc"]
    kernels = {p.name for p in (EVAL_DIR / "broken_kernels").glob("*.cu")}
    texts = {"\n".join(k["errors"][:3]) for k in harvested["kernels"]}
    assert {k["kernel"] for k in harvested["kernels"]} <= kernels
    errors = [q for q in load_queries(packaged_set("9.1")) if q.category == "compiler-error"]
    assert len(errors) == len(harvested["kernels"]) >= 40
    assert all(q.query in texts and "error" in q.query for q in errors)


def test_unknown_set_and_empty_split_are_errors() -> None:
    with pytest.raises(IndexerError, match="no packaged evaluation set"):
        packaged_set("7.0")
    with pytest.raises(IndexerError, match="no queries in split"):
        select([EvalQuery(query="q", expect=["1"], split="dev")], "test")


def test_categories_and_contract_recall_are_scored() -> None:
    searcher_ = _Scripted(
        manual={"a": ["9.7.1", "2"], "b": ["3", "9.7.2"], "c": ["4"]},
        mixed={
            "a": [("contract-x", "contracts"), ("9.7.1", "ptx-isa")],
            "b": [("contract-y", "contracts"), ("contract-x", "contracts"), ("5", "ptx-isa")],
        },
    )
    qs = [
        EvalQuery(query="a", expect=["9.7.1"], category="concept", contract="contract-x"),
        EvalQuery(query="b", expect=["9.7.2"], category="concept", contract="contract-x"),
        EvalQuery(query="c", expect=["4"], category="name"),
    ]
    ev = evaluate(searcher_, qs, label="scripted")
    assert ev.by_category["concept"].queries == 2
    assert ev.by_category["concept"].recall_at_1 == 0.5
    assert ev.by_category["name"].recall_at_1 == 1.0
    assert ev.contract_queries == 2
    assert ev.contract_recall_at_5 == 1.0
    # the manual section survives beside the contracts for "a" (rank 2), not for "b"
    assert ev.contract_manual_recall_at_5 == 0.5
    ranks = {o.query: (o.contract_rank, o.manual_rank_with_contracts) for o in ev.outcomes}
    assert ranks == {"a": (1, 2), "b": (2, None), "c": (None, None)}
    assert evaluate(searcher_, qs[2:]).contract_recall_at_5 is None


def test_fixed_size_windows_cover_the_text() -> None:
    words = [str(i) for i in range(250)]
    ws = windows(words, 120, 60)
    assert all(len(w) == 120 for w in ws)
    assert ws[0][0] == "0" and ws[-1][-1] == "249"
    assert windows(words[:10]) == [words[:10]]


@pytest.fixture
def mini_retriever(tmp_path: Path) -> Retriever:
    home = tmp_path / "home"
    add_manual(MINI_HTML, version="9.1", home=home, checks=MINI_CHECKS)
    build_index(home, knowledge=False)
    return Retriever(home)


def test_chunk_bm25_baseline_and_ablations_search_the_real_index(mini_retriever: Retriever) -> None:
    base = ChunkBM25(mini_retriever)
    assert base.windows >= len(mini_retriever._collection("ptx-isa@9.1").sections)
    hits = base.search("mbarrier try_wait parity", 3)
    assert hits and "mbarrier" in hits[0].breadcrumb.lower()
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert base.search("zzzz-not-a-word", 3) == []
    with pytest.raises(IndexerError, match="covers PTX ISA 9.1 only"):
        base.search("x", 3, sources=["ptx-isa", "contracts"])
    for name in ABLATION_NAMES[1:]:
        got = searcher(name, mini_retriever).search("mbarrier.try_wait", 3, sources=["ptx-isa"])
        assert len(got) == 3, name
    # words no section holds: BM25 alone scores nothing, dense alone still ranks by meaning
    query = "qqqxz vvvyw"
    assert all(h.score == 0 for h in searcher("bm25", mini_retriever).search(query, 3))
    assert all(h.score > 0 for h in searcher("dense", mini_retriever).search(query, 3))
    with pytest.raises(IndexerError, match="unknown ablation"):
        searcher("nope", mini_retriever)


def test_cli_eval_retrieval_takes_the_packaged_set_a_split_and_ablations(
    mini_retriever: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from ptxrag.cli import app

    monkeypatch.setenv("PTXRAG_HOME", str(mini_retriever.store.home))
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "eval-retrieval",
            "--set",
            "9.1",
            "--split",
            "dev",
            "--ablation",
            "bm25-chunks",
            "--ablation",
            "default",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    dev = len(select(load_queries(packaged_set("9.1")), "dev"))
    assert [(r["label"], r["split"], r["queries"]) for r in out] == [
        ("bm25-chunks", "dev", dev),
        ("default", "dev", dev),
    ]
    assert out[0]["contract_recall_at_5"] is None and out[1]["contract_queries"] > 0
    bad = runner.invoke(app, ["eval-retrieval", "--set", "9.1", "--split", "train"])
    assert bad.exit_code != 0 and "--split must be dev, test or all" in bad.output
    bad = runner.invoke(app, ["eval-retrieval", "--set", "9.1", "--ablation", "bm26"])
    assert bad.exit_code != 0 and "unknown ablation" in bad.output


FRESH_SETS = sorted((EVAL_DIR.parent).glob("fresh*/ptx-isa-9.1-fresh*.jsonl"))


@pytest.mark.parametrize(
    "path", [p for p in FRESH_SETS if "sources" not in p.name], ids=lambda p: p.parent.name
)
def test_fresh_sets_expect_real_sections_and_never_train(path: Path, shared_dir: Path) -> None:
    """Every fresh held-out set names real 9.1 sections, and none of its queries reaches the tower, the memory
    or the reranker: the training reader drops a written query whose text is an evaluation query's."""
    import importlib
    import sys

    from ptxrag.indexer.loaders.markdown import load_markdown

    queries = load_queries(path)
    assert len(queries) >= 150
    sections, _ = load_markdown(shared_dir / "corpus" / "ptx-isa-9.1")
    numbers = {s.number for s in sections}
    assert not [(q.query, e) for q in queries for e in q.expect if e not in numbers]
    sys.path.insert(0, str(EVAL_DIR))
    try:
        tower = importlib.import_module("train_query_tower")
    finally:
        sys.path.remove(str(EVAL_DIR))
    assert path.resolve() in {f.resolve() for f in tower.EVAL_FILES}
    trained = {
        " ".join(q.lower().split())
        for q, _, _ in tower.read_training_rounds(sorted((EVAL_DIR / "training").glob("*.jsonl")))
    }
    leaked = [q.query for q in queries if " ".join(q.query.lower().split()) in trained]
    assert not leaked, f"{path.name}: held-out queries in the training data: {leaked}"
