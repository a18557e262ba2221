"""The reader (``reader.py``): a small cross-encoder that reorders the reranker's first candidates on a
close call (on by default; ``FusionWeights(reader=False)`` switches it off). Its file round-trips and is
used only with the model it was trained for; on a real (small) index it reorders a constructed close call,
the switch and the gate leave the order alone, and a retriever without a reader searches as one with the
reader switched off."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ptxrag.indexer import FusionWeights, Retriever
from ptxrag.indexer.embedding import ModelSpec
from ptxrag.indexer.errors import IndexerError
from ptxrag.indexer.reader import (
    QUERY_TOKENS,
    READER_PATH,
    Reader,
    batch,
    forward,
    pair_ids,
    reader_for,
    reader_text,
    save_reader,
)
from ptxrag.indexer.retriever import _named_first
from ptxrag.indexer.schema import Section

MINI_HTML = Path(__file__).parent / "fixtures" / "manuals" / "ptx-isa-mini.html"
QUERY = "wait until the phase of a shared memory barrier completes"
ON = FusionWeights(reader=True, reader_mix=10.0, reader_gate=0.0)
SETTINGS = {"layers": 1, "max_len": 48, "k": 2, "mix": 1.0, "gate": 0.0}


@pytest.fixture(scope="module")
def mini(mini_retriever: Retriever) -> Retriever:
    return mini_retriever  # conftest.py: the mini manual and the pack, indexed once for this module


def test_pairs_are_cut_to_length_and_typed() -> None:
    ids, types = pair_ids(101, 102, list(range(1000, 1000 + QUERY_TOKENS + 9)), list(range(50)), 48)
    assert len(ids) == 48 and ids[0] == 101 and ids[-1] == 102
    assert ids[QUERY_TOKENS + 1] == 102  # the query keeps QUERY_TOKENS tokens, then [SEP]
    assert types == [0] * (QUERY_TOKENS + 2) + [1] * (48 - QUERY_TOKENS - 2)
    got, _, mask = batch([(ids, types), ([101, 5, 102, 7, 102], [0, 0, 0, 1, 1])], pad=0)
    assert got.shape == (2, 48) and mask[1].sum() == 5 and not got[1, 5:].any()


def test_reader_text_reads_title_names_and_description() -> None:
    s = Section(
        number="9.7.1.14",
        title="Integer Arithmetic Instructions: popc",
        parents=("9", "9.7", "9.7.1"),
        defines=("popc",),
        text="popc\n\nPopulation count.\n\nSyntax\n\n```\npopc.type d, a;\n```\n\nDescription\n\nCount the one bits.",
    )
    text = reader_text(s, "9.7 Instructions > 9.7.1 Integer Arithmetic > 9.7.1.14 popc")
    assert text.startswith("Integer Arithmetic > popc (popc) : ")
    assert "Count the one bits." in text and "popc.type d, a;" not in text


def test_reader_file_round_trip_and_model_check(tmp_path: Path) -> None:
    spec = ModelSpec("m", "/m", "fp-1")
    state = {"layer.0.w": np.arange(6, dtype=np.float32).reshape(2, 3), "head.bias": np.ones(1, np.float32)}
    path = tmp_path / "r.npz"
    save_reader(path, state, spec, {**SETTINGS, "seed": 2})
    got = reader_for(spec, path)
    assert got is not None and got.meta["seed"] == 2 and (got.k, got.layers, got.max_len) == (2, 1, 48)
    assert np.array_equal(got.state["layer.0.w"], state["layer.0.w"])
    assert reader_for(ModelSpec("m", "/m", "fp-2"), path) is None  # another model's files
    assert reader_for(spec, tmp_path / "none.npz") is None
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert reader_for(spec, tmp_path / "junk.npz") is None
    save_reader(tmp_path / "old.npz", state, spec, {"layers": 1})  # settings missing
    assert reader_for(spec, tmp_path / "old.npz") is None


def _preferring(r: Retriever, query: str, want: str, over: str, **settings: Any) -> Reader:
    """A one-layer reader (the model's own lowest layer) whose head is the difference of the [CLS]
    states of (query, want) and (query, over): it scores ``want`` about 8 above ``over``."""
    import torch

    model = r.embedder().model
    bert = model[0].auto_model
    tok = model.tokenizer
    layer0 = {f"layer.0.{k}": v.float().numpy().copy() for k, v in bert.encoder.layer[0].state_dict().items()}
    q = tok(query, add_special_tokens=False)["input_ids"]
    pairs = [
        pair_ids(tok.cls_token_id, tok.sep_token_id, q, tok(t, add_special_tokens=False)["input_ids"], 48)
        for t in (want, over)
    ]
    ids, types, mask = (torch.from_numpy(a) for a in batch(pairs, tok.pad_token_id))
    with torch.inference_mode():
        h = forward(bert, bert.encoder.layer[:1], torch.nn.Identity(), ids, types, mask).float().numpy()
    d = h[0] - h[1]
    state = {**layer0, "head.weight": (8 * d / float(d @ d))[None, :], "head.bias": np.zeros(1, np.float32)}
    return Reader(state, r.spec.fingerprint, {**SETTINGS, **settings})


def test_the_reader_reorders_a_close_call_and_the_switch_and_gate_keep_it(
    mini: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = FusionWeights(reader=False)
    before = mini.search(QUERY, 5, sources=["ptx-isa"], weights=off)
    a, b = before[0], before[1]
    keys = mini._keys(None, ["ptx-isa"])[0]
    texts = {h.section_number: mini._reader_text((keys, h.section_number)) for h in before}
    assert b.score < 1.0  # the reranker put b behind a; the reader outweighs that (mix 10)
    reader = _preferring(mini, QUERY, texts[b.section_number], texts[a.section_number])
    monkeypatch.setattr(mini, "reader", reader)
    after = mini.search(QUERY, 5, sources=["ptx-isa"], weights=ON)
    assert [h.section_number for h in after[:2]] == [b.section_number, a.section_number]
    assert [h.section_number for h in after[2:]] == [h.section_number for h in before[2:]]
    scores = [h.score for h in after]
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True)
    # the default's switch, gate and mix; the switch off, and a gate no second candidate reaches, leave the
    # reranker's order
    default = mini.search(QUERY, 5, sources=["ptx-isa"])
    if FusionWeights().reader and b.score >= FusionWeights().reader_gate:
        assert [h.section_number for h in default] == [h.section_number for h in after]
    else:
        assert [h.section_number for h in default] == [h.section_number for h in before]
    assert [h.section_number for h in mini.search(QUERY, 5, sources=["ptx-isa"], weights=off)] == [
        h.section_number for h in before
    ]
    shut = ON.model_copy(update={"reader_gate": 1.0})  # b.score < 1.0 (above)
    assert [h.section_number for h in mini.search(QUERY, 5, sources=["ptx-isa"], weights=shut)] == [
        h.section_number for h in before
    ]
    # searches from several threads get what one thread gets
    got: list[list[str]] = []

    def one() -> None:
        got.append([h.section_number for h in mini.search(QUERY, 5, sources=["ptx-isa"], weights=ON)])

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [[h.section_number for h in after]] * 4


def test_the_reader_reads_as_many_first_candidates_as_the_weights_say(
    mini: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    """k belongs to the stack (FusionWeights.reader_k), not to the reader file."""
    off = FusionWeights(reader=False)
    before = mini.search(QUERY, 5, sources=["ptx-isa"], weights=off)
    keys = mini._keys(None, ["ptx-isa"])[0]
    texts = {h.section_number: mini._reader_text((keys, h.section_number)) for h in before}
    reader = _preferring(mini, QUERY, texts[before[1].section_number], texts[before[0].section_number])
    read: list[int] = []
    inner = reader.scores
    monkeypatch.setattr(reader, "scores", lambda emb, q, docs: read.append(len(docs)) or inner(emb, q, docs))
    monkeypatch.setattr(mini, "reader", reader)
    for k in (2, 3):
        mini.search(QUERY, 5, sources=["ptx-isa"], weights=ON.model_copy(update={"reader_k": k}))
    assert read == [2, 3] and reader.k == SETTINGS["k"]


def test_without_a_fitting_reader_the_search_is_todays(
    mini: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mini, "reader", reader_for(ModelSpec("other", "/x", "fp-other"), READER_PATH))
    assert mini.reader is None
    plain = mini.search(QUERY, 5, sources=["ptx-isa"], weights=ON)
    off = mini.search(QUERY, 5, sources=["ptx-isa"], weights=FusionWeights(reader=False))
    assert [(h.section_number, h.score) for h in plain] == [(h.section_number, h.score) for h in off]


def test_a_reader_that_does_not_fit_the_model_is_refused(mini: Retriever) -> None:
    bad = Reader({"layer.0.nope": np.zeros(2, np.float32)}, mini.spec.fingerprint, dict(SETTINGS))
    with pytest.raises(IndexerError, match="does not fit"):
        bad.build(mini.embedder().model)


def test_no_pack_document_passes_the_named_manual_section() -> None:
    # 0: pack, 1: manual section defining the named instruction, 2: other manual section
    assert _named_first([0, 2, 1], [True, False, False], [False, True, False]) == [2, 1, 0]
    assert _named_first([0, 1, 2], [True, False, False], [False, False, False]) == [0, 1, 2]


def test_the_token_match_head_prefers_the_candidate_saying_what_the_query_says(mini: Retriever) -> None:
    """With a zero [CLS] head the score is the scale times the token match: a candidate holding the
    query's words scores above one that does not; a file whose head and settings disagree is refused."""
    bert = mini.embedder().model[0].auto_model
    state = {f"layer.0.{k}": v.float().numpy().copy() for k, v in bert.encoder.layer[0].state_dict().items()}
    head = {"head.weight": np.zeros((1, 384), np.float32), "head.bias": np.zeros(1, np.float32)}
    reader = Reader(
        {**state, **head, "head.scale": np.asarray([10.0], np.float32)},
        mini.spec.fingerprint,
        {**SETTINGS, "head": "maxsim"},
    )
    docs = [
        "shared memory barrier : wait until the phase completes",
        "floating point : round to nearest even",
    ]
    s = reader.scores(mini.embedder(), QUERY, docs)
    assert s.shape == (2,) and s[1] < s[0] <= 10.0
    with pytest.raises(IndexerError, match="does not fit its settings"):
        Reader({**state, **head}, mini.spec.fingerprint, {**SETTINGS, "head": "maxsim"}).build(
            mini.embedder().model
        )


def test_the_packaged_reader_fits_the_bundled_model() -> None:
    """Fails when the bundled model's files change without retraining (eval/retrieval/train_reader.py)."""
    from ptxrag.indexer.embedding import resolve_model

    reader = reader_for(resolve_model(None), READER_PATH)
    assert reader is not None and reader.maxsim and reader.layers == 2 and 2 <= reader.k <= 5
    assert reader.meta["train_queries"] > 10000 and reader.meta["dev_r1"] > reader.meta["dev_today_r1"]
    assert all(np.isfinite(v).all() for v in reader.state.values())
    assert READER_PATH.stat().st_size < 10_000_000


def test_searches_use_two_torch_threads_only_where_two_cores_are_idle(monkeypatch: Any) -> None:
    from ptxrag.cli.corpus_cmd import query_threads

    monkeypatch.delenv("PTXRAG_TORCH_THREADS", raising=False)
    assert query_threads(cpus=2, load=0.3) == 2
    assert query_threads(cpus=2, load=0.6) == 1  # one core busy: two threads would wait on it
    assert query_threads(cpus=2, load=7.0) == 1
    assert query_threads(cpus=1, load=0.0) == 1
    assert query_threads(cpus=16, load=3.0) == 2
    monkeypatch.setenv("PTXRAG_TORCH_THREADS", "3")
    assert query_threads(cpus=2, load=7.0) == 3
