"""The learned parts of retrieval: pseudo-queries cut from the manual, the query tower, the reranker's
features and ordering rules, and the packaged artefacts matching today's code and model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ptxrag.indexer import FusionWeights, Retriever
from ptxrag.indexer.embedding import ModelSpec, resolve_model
from ptxrag.indexer.fusion import Candidate
from ptxrag.indexer.pseudo import holdout, mask_names, pseudo_queries
from ptxrag.indexer.rerank import FEATURES, RERANK_PATH, Reranker, Row, features, load_reranker
from ptxrag.indexer.schema import Section
from ptxrag.indexer.tower import TOWER_PATH, QueryTower, save_tower, tower_for

MINI_HTML = Path(__file__).parent / "fixtures" / "manuals" / "ptx-isa-mini.html"

POPC = Section(
    number="9.7.1.14",
    title="Integer Arithmetic Instructions: popc",
    parents=("9", "9.7", "9.7.1"),
    defines=("popc", "popc.type"),
    text=(
        "popc\n\nPopulation count of a register.\n\nSyntax\n\n```\npopc.type  d, a;\n```\n\nDescription\n\n"
        "Count the number of one bits in a and place the resulting *population count* in a 32-bit "
        "register.\n\nThe popc.b64 form takes a 64-bit operand. Another sentence of this paragraph.\n\n"
        "Examples\n\n```\npopc.b32  d, a;\n```\n"
    ),
)
SHARED = Section(
    number="5.1.7",
    title="Shared State Space",
    parents=("5", "5.1"),
    text="The shared (.shared) state space is a memory that is owned by an executing CTA.\n\n| a | b |",
)
NOTES = Section(
    number="13.1",
    title="Changes in PTX ISA Version 9.1",
    parents=("13",),
    text="New Features\n\n* Adds support for multimem.cp.async.bulk\n  and multimem.cp.reduce.async.bulk instructions.\n",
)


def test_mask_names_hides_every_defined_name_and_its_variants() -> None:
    out = mask_names("cp.async.bulk.tensor.2d copies; see cp.async.bulk too", ["cp.async.bulk.tensor"])
    assert "cp.async.bulk.tensor" not in out and out.startswith("this instruction copies")
    assert "cp.async.bulk too" in out  # another instruction's name stays
    assert mask_names("The popc instruction", ["popc"]) == "The this instruction instruction"


def test_pseudo_queries_describe_without_naming_and_keep_their_source() -> None:
    qs = pseudo_queries([POPC, SHARED, NOTES])
    kinds = {q.kind for q in qs}
    assert kinds == {"purpose", "description", "title", "prose", "release"}
    popc = [q for q in qs if q.section == POPC.number]
    assert popc and all("popc" not in q.query.lower() for q in popc)
    assert any(q.kind == "purpose" and q.query == "Population count of a register." for q in popc)
    short = POPC.model_copy(update={"text": POPC.text.replace("Population count of a register.", "Count.")})
    assert not any(q.kind == "purpose" for q in pseudo_queries([short]))  # under MIN_WORDS
    first = [q for q in popc if q.kind == "description"]
    assert len(first) == 2  # the first sentence of each Description paragraph
    assert first[1].query.startswith("The this instruction form")
    assert len([q for q in pseudo_queries([POPC], all_sentences=True) if q.kind == "description"]) == 3
    assert all(q.source_text for q in qs)
    (rel,) = [q for q in qs if q.kind == "release"]
    assert rel.section == "13.1" and rel.query.endswith("multimem.cp.reduce.async.bulk instructions.")
    assert not any("|" in q.query for q in qs)  # tables are not queries
    assert holdout("a query") == holdout("a query")


def test_tower_round_trip_and_model_check(tmp_path: Path) -> None:
    spec = ModelSpec("m", "/m", "fp-1")
    state = {"layer.5.w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    path = tmp_path / "t.npz"
    save_tower(path, state, spec, {"layers": [5], "seed": 2})
    got = tower_for(spec, path)
    assert got is not None and got.layers == [5] and got.meta["seed"] == 2
    assert np.array_equal(got.state["layer.5.w"], state["layer.5.w"])  # float16 holds these exactly
    assert tower_for(ModelSpec("m", "/m", "fp-2"), path) is None  # another model's files
    assert tower_for(spec, tmp_path / "none.npz") is None


def test_tower_embeds_through_the_models_lower_layers_then_its_own() -> None:
    """A tower holding the model's own weights embeds a query as the model does (``encode_query``); a
    changed tower layer moves the embedding; a tower whose layers are not the model's top ones is refused."""
    from ptxrag.indexer.embedding import Embedder

    spec = resolve_model(None)
    e = Embedder(spec, bf16=False)
    bert = e._model[0].auto_model
    top = len(bert.encoder.layer) - 1
    state = {f"layer.{top}.{k}": v.numpy().copy() for k, v in bert.encoder.layer[top].state_dict().items()}
    q = "wait for the bulk copy to land in shared memory"
    ref = e.encode_query(q)
    same = QueryTower(state, [top], spec.fingerprint, {}).embed(e, q)
    assert float(same @ ref) > 0.9999
    bias = f"layer.{top}.output.dense.bias"
    moved = {**state, bias: state[bias] + np.linspace(-1, 1, state[bias].size, dtype=np.float32)}
    other = QueryTower(moved, [top], spec.fingerprint, {}).embed(e, q)
    assert float(other @ ref) < 0.999 and abs(float(np.linalg.norm(other)) - 1) < 1e-5
    with pytest.raises(Exception, match="not the top layers"):
        QueryTower(state, [0], spec.fingerprint, {}).build(e._model)


def _row(number: str, **kw: float | None) -> Row:
    c = Candidate(key=("ptx-isa@9.1", number), **kw)  # type: ignore[arg-type]
    return Row(cand=c, fused=0.5, bonus=0.0, title=f"title of {number}", pack=False)


def test_features_see_signal_ranks_and_the_section_tree() -> None:
    rows = [
        _row("9.7.1", lexical=4.0, dense=0.5),
        _row("9.7.1.14", lexical=8.0, dense=0.7),
        _row("5.1.7", title=2.0),
    ]
    x = features(rows, "title of 9.7.1.14", asks_instruction=False, asks_history=False)
    assert x.shape == (3, len(FEATURES))
    col = {n: i for i, n in enumerate(FEATURES)}
    assert x[1, col["rank_lexical"]] == 1.0 and x[0, col["rank_lexical"]] < 1.0
    assert x[2, col["rank_lexical"]] == 0.0 and x[2, col["rel_dense"]] == 0.0
    assert x[0, col["rel_lexical"]] == pytest.approx(0.5)
    assert x[1, col["rel_dense"]] == pytest.approx(1.0)
    assert x[1, col["parent_listed"]] == 1.0 and x[0, col["parent_listed"]] == 0.0
    assert x[0, col["children_listed"]] > 0 and x[1, col["children_listed"]] == 0
    assert x[1, col["title_overlap"]] == 1.0


def test_a_reranker_file_for_other_features_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    n = len(FEATURES)
    w = np.linspace(-1, 1, n).astype(np.float32)
    path.write_text(Reranker(w, np.zeros(n, np.float32), np.ones(n, np.float32), {"seed": 3}).to_json())
    got = load_reranker(path)
    assert got is not None and got.meta == {"seed": 3}
    x = np.eye(n, dtype=np.float32)
    assert np.allclose(got.scores(x), w, atol=1e-5)
    good = json.loads(path.read_text())
    stale = tmp_path / "s.json"
    stale.write_text(json.dumps({**good, "features": [*FEATURES[:-1], "gone"]}))
    assert load_reranker(stale) is None


def test_packaged_tower_and_reranker_fit_the_bundled_model_and_todays_features() -> None:
    """Fails when FEATURES change without retraining (eval/retrieval/train_reranker.py) or the bundled
    model's files change without retraining the tower (eval/retrieval/train_query_tower.py)."""
    rr = load_reranker(RERANK_PATH)
    assert rr is not None and rr.meta["trained_on"].startswith("dev split")
    assert np.isfinite(rr.weights).all() and (rr.scale > 0).all()
    tower = tower_for(resolve_model(None), TOWER_PATH)
    assert tower is not None and tower.layers == list(range(6))
    assert tower.meta["train_queries"] > 9000 and tower.meta["sections"] > 690
    assert all(np.isfinite(v).all() for v in tower.state.values())


@pytest.fixture(scope="module")
def mini(mini_retriever: Retriever) -> Retriever:
    return mini_retriever  # conftest.py: the mini manual and the pack, indexed once for this module


def test_reranked_search_scores_and_exclusions(mini: Retriever) -> None:
    assert mini.reranker is not None and mini.tower is not None
    query = "wait until the phase of a shared memory barrier completes"
    hits = mini.search(query, 5, sources=["ptx-isa"])
    scores = [h.score for h in hits]
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True)
    # a search with exclusions scores the rest as the search without them did (the agent compares)
    rest = mini.search(query, 4, sources=["ptx-isa"], exclude_sections=[hits[0].section_number])
    assert [h.section_number for h in rest] == [h.section_number for h in hits[1:]]
    assert [h.score for h in rest] == scores[1:]
    plain = mini.search(query, 5, sources=["ptx-isa"], weights=FusionWeights(rerank=False))
    assert {h.section_number for h in plain} & {h.section_number for h in hits}
    # the exact scan reads the chunk vectors the build saved, the same Chroma holds, in chunk order
    loaded = mini._collection("ptx-isa@9.1")
    folder = mini.store.lexical_dir(loaded.entry.physical)
    saved = mini.store.read_vectors(folder, len(loaded.chunk_section))
    got = mini._chroma(loaded).get(include=["embeddings"])
    chroma = dict(zip(got["ids"], np.asarray(got["embeddings"]), strict=True))
    assert saved is not None
    assert np.allclose(saved, np.stack([chroma[c] for c in loaded.chunk_section]), atol=1e-6)
    assert mini.store.read_vectors(folder, len(loaded.chunk_section) + 1) is None  # a stale file is ignored
    # every candidate carries its best chunk's cosine; the tower and the base model embed differently
    keys = mini._keys(None, ["ptx-isa"])
    fused = mini.fused(query, keys, mini.weights)
    base = mini.fused(query, keys, FusionWeights(tower=False))
    assert all(c.dense is not None for c, _ in fused.ranked)
    tuned_cos = {c.key: c.dense for c, _ in fused.ranked}
    base_cos = {c.key: c.dense for c, _ in base.ranked}
    assert any(abs(tuned_cos[k] - base_cos[k]) > 1e-3 for k in tuned_cos.keys() & base_cos.keys())


def test_a_pack_document_never_passes_the_manual_section_defining_the_name(mini: Retriever) -> None:
    for query in ("mbarrier.try_wait", "mbarrier.try_wait.parity"):
        hits = mini.search(query, 5)
        manual = [i for i, h in enumerate(hits) if h.source == "ptx-isa" and h.instructions]
        pack = [i for i, h in enumerate(hits) if h.source != "ptx-isa"]
        assert manual, query
        assert not pack or manual[0] < pack[0], (query, [h.section_number for h in hits])
