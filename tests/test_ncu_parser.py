"""The ncu SourceCounters CSV parser, on output recorded on the H200 (tests/fixtures/ncu/).

h200-probe-source-sass.csv is what `ncu --section SourceCounters --page source --print-source sass --csv
--log-file` wrote for h200-probe.cu (same folder) on 2026-12-02. warp_ops holds a live redux.sync.add and a
dead redux.sync.max under `if (flag == 12345)`, which the compiler predicated (@!P1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxrag.sandbox.ncu import NcuParseError, execution_counts, explain, parse_source_csv
from ptxrag.sandbox.opcodes import OpcodeRow, Requirement, resolve

FIXTURE = Path(__file__).parent / "fixtures" / "ncu" / "h200-probe-source-sass.csv"


@pytest.fixture(scope="module")
def kernels():
    return parse_source_csv(FIXTURE.read_text())


def test_blocks_are_parsed_and_duplicates_counted_once(kernels):
    names = [k.name for k in kernels]
    assert names == [
        "warp_ops(const int *, int *, int)",
        "bulk_copy(const float *, float *, int)",
        "wgmma_probe(float *)",
    ]
    assert all(len(k.rows) > 10 for k in kernels)


def test_live_redux_executes(kernels):
    ie = execution_counts(kernels, resolve("redux.sync"))
    assert ie.executed
    assert ie.predicated_on_thread_instructions == 33792  # 132 blocks x 256 threads
    assert ie.sass_opcodes == ["REDUX.MAX", "REDUX.SUM.S32"]


def test_dead_predicated_instruction_is_issued_but_does_no_work(kernels):
    dead_only = Requirement("redux.sync.max", (OpcodeRow("redux.sync.max", (r"REDUX\.MAX",)),))
    ie = execution_counts(kernels, dead_only)
    assert ie.instructions_executed == 1056 and ie.thread_instructions_executed == 33792
    assert ie.predicated_on_thread_instructions == 0
    assert not ie.executed
    msg = explain(ie)
    assert "compiled in but never executed" in msg and "predicate false" in msg


def test_hopper_instructions_of_the_probe_executed(kernels):
    for ptx in (
        "cp.async.bulk.shared::cluster.global",
        "mbarrier.arrive.expect_tx",
        "mbarrier.try_wait.parity",
        "wgmma.mma_async",
        "elect.sync",
    ):
        ie = execution_counts(kernels, resolve(ptx))
        assert ie.executed, (ptx, ie)


def test_instruction_absent_from_profiled_kernels():
    ie = execution_counts(parse_source_csv(FIXTURE.read_text()), resolve("setmaxnreg"))
    assert ie.sass_rows == 0 and not ie.executed
    assert "not in any profiled kernel" in explain(ie)


def test_noise_lines_and_missing_columns():
    text = (
        '==PROF== Connected\nhello from the program\n"Kernel Name","k()",\n"Address","Source"\n"0x1","EXIT"\n'
    )
    with pytest.raises(NcuParseError, match="lacks a column"):
        parse_source_csv(text)
    assert parse_source_csv("==PROF== nothing profiled\n") == []
