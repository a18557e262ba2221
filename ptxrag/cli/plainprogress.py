"""Progress as plain lines, for output that is not a terminal (a log file, CI, a pipe), where Rich's live
bars print nothing until the end. One line when a step starts, one per quarter done, one when it ends.

Steps run one after another, and a step's first report may come only after its first batch (embedding
reports per batch): a step's time is counted from the previous report of any step, so it includes that
first batch."""

from __future__ import annotations

import time
from typing import IO


class PlainProgress:
    """A ``(label, done, total)`` callback that writes ``label: done/total (pct%, elapsed s)`` lines."""

    def __init__(self, stream: IO[str], steps: int = 4) -> None:
        self._stream = stream
        self._steps = max(1, steps)
        self._shown: dict[str, int] = {}  # label -> last milestone printed (-1: only the start line)
        self._start: dict[str, float] = {}
        self._last: float | None = None  # when any step last reported

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.monotonic()
        previous, self._last = self._last, now
        if label not in self._shown:
            self._start[label] = now if previous is None else previous
            self._shown[label] = -1
            self._line(f"{label}: started ({total} to do)")
        if total <= 0:
            return
        milestone = min(self._steps, done * self._steps // total)
        if milestone > self._shown[label] and (milestone > 0 or done == total):
            self._shown[label] = milestone
            pct = 100 * done // total
            self._line(f"{label}: {done}/{total} ({pct}%, {now - self._start[label]:.1f} s)")

    def _line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()
