"""The query memory (ptxrag/indexer/memory.py): remembered training queries as extra vectors of their
sections, placed by number and title, switched off by FusionWeights.memory, used only with its tower."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptxrag.indexer import Retriever
from ptxrag.indexer.baselines import ABLATIONS
from ptxrag.indexer.embedding import ModelSpec, resolve_model
from ptxrag.indexer.fusion import FusionWeights
from ptxrag.indexer.memory import MEMORY_PATH, QueryMemory, memory_for, save_memory, tower_digest
from ptxrag.indexer.retriever import dense_query
from ptxrag.indexer.schema import Section
from ptxrag.indexer.tower import TOWER_PATH, tower_for

QUERY = "tell the copy engine to round every element to the nearest even value"


@pytest.fixture(scope="module")
def mini(mini_retriever: Retriever) -> Retriever:
    return mini_retriever  # conftest.py: the mini manual and the pack, indexed once for this module


def _memory(vectors: np.ndarray, sections: list[str], titles: list[str], rounds: list[str]) -> QueryMemory:
    return QueryMemory(vectors.astype(np.float32), sections, titles, rounds, "fp", "tower", {})


def _sections() -> list[Section]:
    return [
        Section(number="9.7.1", title="Integer Arithmetic"),
        Section(number="9.7.2", title="mbarrier.try_wait"),
        Section(number="9.7.3", title="Syntax"),
        Section(number="9.7.4", title="Syntax"),
    ]


def test_entries_are_placed_by_number_and_title_and_a_round_can_be_left_out() -> None:
    v = np.eye(6, 8)
    mem = _memory(
        v,
        # same number and title; renumbered (title used once on each side); same number, other title;
        # a repeated title under a number that has another title here; unknown number and title
        ["9.7.1", "9.7.9", "9.7.2", "9.7.3", "9.7.7", "9.9"],
        ["Integer Arithmetic", "MBARRIER.try_wait", "Floating Point", "Syntax", "Syntax", "Gone"],
        ["r1", "r2", "r1", "r1", "r2", "r2"],
    )
    placed = mem.place(_sections())
    assert placed is not None
    assert placed.entry_rows.tolist() == [0, 1, 2]  # rows of 9.7.1, 9.7.2 (renamed-number), 9.7.3
    assert placed.vectors.tolist() == v[[0, 1, 3]].tolist()
    assert placed.rows.tolist() == [0, 1, 2] and placed.starts.tolist() == [0, 1, 2]
    sims, best = placed.best(v[1])
    assert sims.tolist() == [0.0, 1.0, 0.0] and best.tolist() == [0.0, 1.0, 0.0]
    without = mem.place(_sections(), without_round="r2")
    assert without is not None and without.entry_rows.tolist() == [0, 2]
    # one memory serves every index of a process: a smaller manual of the same version gets its own rows
    # (a placement cached by collection name once put 9.1's rows on an 8-section index)
    small = mem.place([Section(number="9.7.2", title="mbarrier.try_wait")])
    assert (
        small is not None and small.entry_rows.tolist() == [0] and small.vectors.tolist() == [v[1].tolist()]
    )
    assert _memory(v[:1], ["1"], ["Other"], ["r1"]).place(_sections()) is None


def test_a_section_with_a_remembered_query_like_the_new_one_rises(
    mini: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    dense_only = ABLATIONS["dense-memory"]
    assert mini.tower is not None
    before = mini.search(
        QUERY, 20, sources=["ptx-isa"], weights=dense_only.model_copy(update={"memory": False})
    )
    target = before[-1]  # the section the dense signal likes least of these
    qvec = mini._query_vector(dense_query(QUERY), True)
    mem = _memory(qvec[None, :], [target.section_number], [target.title], ["r1"])
    monkeypatch.setattr(mini, "memory", mem)
    mini.clear_query_cache()
    after = mini.search(QUERY, 5, sources=["ptx-isa"], weights=dense_only)
    assert after[0].section_number == target.section_number
    off = mini.search(QUERY, 20, sources=["ptx-isa"], weights=dense_only.model_copy(update={"memory": False}))
    assert [h.section_number for h in off] == [h.section_number for h in before]
    # the base model embeds elsewhere: without the tower the memory is not used
    plain = ABLATIONS["dense"]
    assert [h.section_number for h in mini.search(QUERY, 10, sources=["ptx-isa"], weights=plain)] == [
        h.section_number
        for h in mini.search(
            QUERY, 10, sources=["ptx-isa"], weights=plain.model_copy(update={"memory": True})
        )
    ]
    # a held-out query leaves its own round out (the reranker's trainer)
    keys = mini._keys(None, ["ptx-isa"])
    fused = mini.fused(QUERY, keys, dense_only, memory_without="r1")
    assert fused.ranked[0][0].key[1] != target.section_number


def test_the_memory_is_used_only_with_its_tower_and_model(tmp_path: Path) -> None:
    spec = resolve_model(None)
    tower = tower_for(spec)
    assert tower is not None
    path = tmp_path / "m.npz"
    vec = np.ones((2, 4), np.float32) / 2
    save_memory(path, vec, ["1", "2"], ["A", "B"], ["r1", "r1"], spec, tower_digest(TOWER_PATH), {})
    got = memory_for(spec, tower, path)
    assert got is not None and got.sections == ["1", "2"] and np.allclose(got.vectors, vec, atol=1e-2)
    assert memory_for(spec, None, path) is None  # no tower: queries are the base model's
    other = tmp_path / "o.npz"
    save_memory(other, vec, ["1", "2"], ["A", "B"], ["r1", "r1"], spec, "another tower", {})
    assert memory_for(spec, tower, other) is None
    stranger = tmp_path / "s.npz"
    save_memory(
        stranger, vec, ["1", "2"], ["A", "B"], ["r1", "r1"], ModelSpec("x", "/x", "fp-x"), tower_digest(), {}
    )
    assert memory_for(spec, tower, stranger) is None
    assert memory_for(spec, tower, tmp_path / "missing.npz") is None


def test_the_packaged_memory_fits_the_packaged_tower() -> None:
    """Fails when the query tower is retrained without rebuilding the memory
    (eval/retrieval/build_query_memory.py)."""
    spec = resolve_model(None)
    mem = memory_for(spec, tower_for(spec))
    assert mem is not None and len(mem) > 10000
    assert np.allclose(np.linalg.norm(mem.vectors, axis=1), 1.0, atol=1e-3)
    assert len(set(mem.sections)) > 600 and {"r1", "r5", "errors"} <= set(mem.rounds.tolist())
    assert MEMORY_PATH.stat().st_size < 10_000_000
    assert FusionWeights().memory
