"""Plain progress lines (for `ptxrag index` off a terminal): a start line, one per quarter, an end line,
never the same milestone twice, whatever order and granularity the callbacks come in."""

from __future__ import annotations

import io

from ptxrag.cli.plainprogress import PlainProgress


def _run(calls: list[tuple[str, int, int]]) -> list[str]:
    out = io.StringIO()
    p = PlainProgress(out)
    for c in calls:
        p(*c)
    return out.getvalue().splitlines()


def test_quarters_and_end_for_fine_grained_updates() -> None:
    lines = _run([("embed", d, 1000) for d in range(0, 1001)])
    assert lines[0] == "embed: started (1000 to do)"
    done = [ln.split(" (")[0] for ln in lines[1:]]
    assert done == ["embed: 250/1000", "embed: 500/1000", "embed: 750/1000", "embed: 1000/1000"]
    assert "(100%" in lines[-1]


def test_repeated_and_coarse_updates_print_each_milestone_once() -> None:
    # the same value reported many times, then one jump straight to the end
    lines = _run([("store", 3, 10)] * 5 + [("store", 10, 10)] * 3)
    assert lines == [lines[0], lines[1], lines[2]] and len(lines) == 3
    assert lines[0] == "store: started (10 to do)"
    assert lines[1].startswith("store: 3/10 (30%") and lines[2].startswith("store: 10/10 (100%")


def test_interleaved_labels_and_empty_totals() -> None:
    lines = _run([("a", 0, 2), ("b", 0, 0), ("a", 1, 2), ("b", 0, 0), ("a", 2, 2)])
    assert lines[0] == "a: started (2 to do)" and lines[1] == "b: started (0 to do)"
    assert [ln.split(" (")[0] for ln in lines[2:]] == ["a: 1/2", "a: 2/2"]


def test_a_step_first_heard_of_after_its_first_batch_counts_from_the_previous_step(monkeypatch) -> None:
    """Embedding reports after each batch: its time starts when the step before it ended, not at 32/64."""
    from ptxrag.cli import plainprogress

    clock = iter([0.0, 1.0, 9.0, 10.0])
    monkeypatch.setattr(plainprogress.time, "monotonic", lambda: next(clock))
    lines = _run([("chunking", 0, 1), ("chunking", 1, 1), ("embedding", 32, 64), ("embedding", 64, 64)])
    assert lines[2] == "embedding: started (64 to do)"
    assert lines[3] == "embedding: 32/64 (50%, 8.0 s)" and lines[4] == "embedding: 64/64 (100%, 9.0 s)"
