"""Retrieval returns pattern and debug-hint sections as their own kinds, next to contracts (the real index:
Chroma and the bundled MiniLM model, over the knowledge pack alone, no manual)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxrag.indexer import Retriever, build_index


@pytest.fixture(scope="module")
def pack_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("pack-home")
    report = build_index(home)
    by_source = {c.source: c for c in report.collections}
    assert by_source["patterns"].sections == 5 and by_source["hints"].sections == 1
    return home


def test_a_pattern_is_found_by_what_it_does(pack_home: Path) -> None:
    r = Retriever(pack_home)
    hits = r.search(
        "persistent kernel walking tiles in grouped raster order for L2 reuse", k=3, sources=["patterns"]
    )
    assert hits[0].section_number == "pattern-persistent-tile-scheduler" and hits[0].source == "patterns"
    hits = r.search("multicast the B tile to both CTAs of the cluster", k=2, sources=["patterns"])
    assert hits[0].section_number == "pattern-tma-multicast-cluster"


def test_patterns_and_hints_compete_with_contracts_in_a_search_over_all_sources(pack_home: Path) -> None:
    r = Retriever(pack_home)
    hits = r.search("online softmax attention with wgmma and a TMA producer warpgroup", k=5)
    assert "pattern-fa3-attention-pipeline" in [h.section_number for h in hits]
    hits = r.search("kernel hangs on the first lap of the pipeline", k=3, sources=["hints", "contracts"])
    assert {h.source for h in hits} <= {"hints", "contracts"}
    assert "hints-debug-sm90" in [h.section_number for h in hits]
