"""Where an attempt stopped, as a short reason that groups: the same mistake in two runs reads the same.

The sandbox's messages carry paths of temporary files, line numbers, sizes and counts; those differ between
attempts that failed for the same reason, so they are masked before counting.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ptxrag.sandbox import EvaluationReport

_QUOTED = re.compile(r"('[^']*'|\"[^\"]*\"|`[^`]*`)")
_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:/[\w.+-]+)+/?")
# nvcc's intermediate files, named relative to the compile's folder when the compile is contained
_NVCC_TMP = re.compile(r"\btmpxft_[0-9a-fA-F]+_[0-9a-fA-F]+-\d+_[\w.+-]+")
_LINE = re.compile(r"\bline \d+\b")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")
_SPACES = re.compile(r"\s+")
MAX_REASON_CHARS = 110


def _mask(text: str) -> str:
    parts = _QUOTED.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a quoted identifier or value: what the compiler complained about, kept as is
            out.append(part)
            continue
        part = _PATH.sub("<file>", part)
        part = _NVCC_TMP.sub("<file>", part)
        part = _LINE.sub("line N", part)
        part = _HEX.sub("0xN", part)
        part = _NUMBER.sub("N", part)
        out.append(part)
    return _SPACES.sub(" ", "".join(out)).strip(" ,;:")


def normalize_reason(message: str) -> str:
    """The first line of a stage message, masked and shortened: ``compile error: ptxas <file>, line N;
    error : Unknown modifier '.i32'``."""
    first = next((ln for ln in message.splitlines() if ln.strip()), "")
    masked = _mask(first)
    if len(masked) > MAX_REASON_CHARS:
        masked = masked[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return masked


def failure_of(
    report: EvaluationReport | None, extraction_error: str | None
) -> tuple[str | None, str | None]:
    """``(stage, reason)`` of an attempt that failed, or ``(None, None)`` when nothing failed (success, or
    every stage that ran passed and the GPU stages were skipped). ``stage`` is ``no_code`` when the reply
    held no source file."""
    if report is None:
        return "no_code", normalize_reason(extraction_error or "the reply held no code")
    failed = report.first_failure
    if failed is None:
        return None, None
    return failed.stage, f"{failed.stage} {failed.status}: {normalize_reason(failed.message)}"


def top_failures(reasons: Iterable[tuple[str, str | None]], top: int = 5) -> dict[str, list[tuple[str, int]]]:
    """The ``top`` most common reasons per group, from ``(group, reason)`` pairs (None reasons skipped);
    ties broken alphabetically so the order is stable."""
    counts: dict[str, Counter[str]] = {}
    for group, reason in reasons:
        if reason:
            counts.setdefault(group, Counter())[reason] += 1
    return {g: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:top] for g, c in sorted(counts.items())}
