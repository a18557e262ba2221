"""eval/retrieval/pooled.py: pooled held-out scores with bootstrap intervals and the paired difference."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "eval" / "retrieval" / "pooled.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("pooled", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, labels: dict[str, list[int | None]]) -> Path:
    payload = [{"label": lab, "outcomes": [{"rank": r} for r in ranks]} for lab, ranks in labels.items()]
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_pooled_recall_interval_and_paired_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(tmp_path / "a.json", {"default": [1, 1, 2, None], "no-reader": [1, 2, 1, None]})
    b = _write(tmp_path / "b.json", {"default": [1] * 6, "no-reader": [1] * 5 + [3]})
    assert _module().main([str(a), str(b), "--against", "no-reader", "--resamples", "2000"]) == 0
    out = capsys.readouterr().out
    pooled = next(line for line in out.splitlines() if "pooled" in line and "queries" in line)
    assert "10 queries: recall@1 0.800" in pooled and "recall@5 0.900" in pooled
    lo, hi = (float(x) for x in pooled.split("recall@1 0.800 [")[1].split("]")[0].split(", "))
    assert lo < 0.8 < hi
    # default has b's last query and a's second first; no-reader has a's third: +1 net of 10 queries
    assert "+0.100" in out and "(2 first places only default has, 1 only no-reader)" in out


def test_a_missing_label_is_a_clear_error(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", {"no-reader": [1]})
    with pytest.raises(SystemExit, match="no evaluation labelled 'default'"):
        _module().main([str(a)])
