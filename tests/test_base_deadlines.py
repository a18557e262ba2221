"""Harness deadlines stretch under load, never shrink, and a tool that stalls is reported as the harness's
timeout, not the candidate's failure."""

from __future__ import annotations

import os
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
    tmp_path.chmod(0o755)  # the tool runs contained, as the compile uid when root: it must reach the script
    slow = tmp_path / "cuobjdump"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(static, "require_cuobjdump", lambda: slow)
    with pytest.raises(static.HarnessTimeout, match="harness timeout: cuobjdump"):
        static.disassemble(tmp_path / "lib.so", timeout_s=0.5)
    # through the stage: an `error` (harness) result that names the harness, never `failed`
    monkeypatch.setattr(static, "harness_timeout", lambda base_s: 0.5)
    res = static.static_check("", tmp_path / "lib.so", [], [])
    assert res.status == "error"
    assert "harness timeout" in res.message and "not the candidate" in res.message


def test_compile_path_deadlines_stretch_but_the_cpu_budget_does_not(tmp_path: Path, monkeypatch):
    """Every compiler command of the compile path (the stage's nvcc, the mutant dry run, --keep build and
    replays) gets a wall deadline stretched by the load and PTXRAG_TIMEOUT_SCALE, while its CPU budget
    (RLIMIT_CPU, what the candidate's compile may cost) stays the configured one. A fixed 120 s dry-run
    deadline once failed tests/test_sandbox_mutation.py on a loaded machine."""
    from ptxrag.sandbox import compile as comp
    from ptxrag.sandbox.mutation import build_mutants

    monkeypatch.setenv(deadlines.SCALE_ENV, "7")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    calls: list[tuple[str, float, int]] = []
    real = comp.run_contained

    def spy(cmd, *, timeout_s, limits, **kw):  # noqa: ANN001, ANN202
        calls.append((" ".join(cmd[:3]), timeout_s, limits.cpu_s))
        return real(cmd, timeout_s=timeout_s, limits=limits, **kw)

    monkeypatch.setattr(comp, "run_contained", spy)
    src = '__global__ void k(unsigned* o) { unsigned v = 1; asm volatile("redux.sync.add.u32 %0, %0, 0xffffffff;" : "+r"(v)); o[0] = v; }\n'
    gencode = "-gencode=arch=compute_90a,code=sm_90a"
    assert comp.compile_candidate(src, gencode, timeout_s=40, use_cache=False).status == "passed"
    (m,) = build_mutants(src, gencode, ["redux.sync"], timeout_s=40, out_dir=tmp_path)
    assert m.status == "built", m
    compiles = [c for c in calls if "cuobjdump" not in c[0]]
    assert len(compiles) == 4  # the stage's compile, the dry run, the --keep build, one replay
    for what, wall_s, cpu_s in compiles:
        assert wall_s == pytest.approx(280.0), what
        assert cpu_s == 50, what
    tools = [c for c in calls if "cuobjdump" in c[0]]  # the mutant's SASS against the original's
    assert len(tools) == 2 and all(w == pytest.approx(60.0 * 7) for _, w, _ in tools), tools
