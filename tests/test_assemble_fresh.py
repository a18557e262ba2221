"""eval/retrieval/assemble_fresh.py: a fresh set's rows equal to training or tuning texts are dropped before
it is scored, compiler locations and case aside, and each kept row gets its nearest training Jaccard."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "eval" / "retrieval" / "assemble_fresh.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("assemble_fresh", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jsonl(path: Path, rows: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_rows_equal_to_training_or_tuning_texts_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    training = tmp_path / "training"
    training.mkdir()
    _jsonl(
        training / "t.jsonl",
        [
            {"section": "9.7.1.1", "query": "ptxas error   : Arguments mismatch for instruction 'add'"},
            {"section": "9.7.13.15", "query": "wait on a shared memory barrier phase"},
        ],
    )
    monkeypatch.setattr(mod, "TRAINING", training)
    probe = _jsonl(tmp_path / "probe.jsonl", [{"query": "Unknown modifier '.x'"}])
    writer = _jsonl(
        tmp_path / "w.jsonl",
        [
            # the training text with a location and other case: the same text
            {
                "id": "a1",
                "query": "ptxas hint_add.ptx, line 9; error   : ARGUMENTS mismatch for instruction 'add'",
            },
            {"id": "a2", "query": "unknown   modifier '.x'"},  # a tuning text
            {"id": "a3", "query": "wait on a shared memory barrier"},  # near a training text, kept
            {"id": "a4", "query": "how many bytes does a tensor map take"},
            {"id": "a5", "query": "How many bytes does a tensor map take"},  # a repeat within the set
        ],
    )
    out = tmp_path / "out.jsonl"
    assert mod.main([str(out), str(writer), "--also", str(probe)]) == 0
    kept = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in kept] == ["a3", "a4"]
    printed = capsys.readouterr().out
    assert "dropped a1: text equals a query of training" in printed
    assert "dropped a2: text equals a query of probe.jsonl" in printed
    assert "dropped a5: text repeats an earlier row" in printed
    # "wait on a shared memory barrier" has 6 words, all in the 7-word training text: 6/7
    assert kept[0]["train_jaccard"] == round(6 / 7, 3)
    assert kept[1]["train_jaccard"] < 0.2
