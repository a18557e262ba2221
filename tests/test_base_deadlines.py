"""Harness deadlines stretch under load, never shrink, and a tool that stalls is reported as the harness's
timeout, not the candidate's failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ptxrag.base import deadlines
from ptxrag.sandbox import static


def test_idle_machine_keeps_the_base_deadline(monkeypatch):
    monkeypatch.delenv(deadlines.SCALE_ENV, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert deadlines.harness_timeout(60.0) == 60.0


def test_busy_machine_stretches_the_deadline_with_a_cap(monkeypatch):
    monkeypatch.delenv(deadlines.SCALE_ENV, raising=False)
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0 * cpus, 0.0, 0.0))
    assert deadlines.harness_timeout(60.0) == pytest.approx(300.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (1e9, 0.0, 0.0))  # runaway load: capped, not unbounded
    assert deadlines.harness_timeout(60.0) == 60.0 * deadlines.MAX_LOAD_FACTOR


@pytest.mark.parametrize("bad", ["0.5", "0", "-3", "nan", "inf", "abc", "1e400"])
def test_scale_that_would_shorten_or_break_deadlines_is_refused(monkeypatch, bad):
    monkeypatch.setenv(deadlines.SCALE_ENV, bad)
    with pytest.raises(deadlines.TimeoutScaleError, match=deadlines.SCALE_ENV):
        deadlines.harness_timeout(60.0)


def test_operator_scale_multiplies(monkeypatch):
    monkeypatch.setenv(deadlines.SCALE_ENV, "3")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert deadlines.harness_timeout(30.0) == 90.0


def test_stalling_cuobjdump_is_a_harness_timeout_not_a_candidate_failure(tmp_path: Path, monkeypatch):
    slow = tmp_path / "cuobjdump"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(static, "require_cuobjdump", lambda: slow)
    with pytest.raises(static.HarnessTimeout, match="harness timeout: cuobjdump"):
        static.disassemble(tmp_path / "lib.so", timeout_s=0.5)
    # through the stage: an `error` (harness) result that names the harness, never `failed`
    monkeypatch.setattr(static, "harness_timeout", lambda base_s: 0.5)
    res = static.static_check("", tmp_path / "lib.so", [], [])
    assert res.status == "error"
    assert "harness timeout" in res.message and "not the candidate" in res.message
