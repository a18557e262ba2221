"""Every verifiable row of the PTX-to-SASS opcode table is confirmed by compiling its probe kernel."""

from __future__ import annotations

from collections import defaultdict
from importlib import resources
from pathlib import Path

import pytest

from ptxrag.sandbox.compile import compile_candidate
from ptxrag.sandbox.opcodes import UnknownInstruction, opcode_of, resolve, table
from ptxrag.sandbox.static import disassemble

PROBES = Path(str(resources.files("ptxrag.sandbox") / "probes"))


@pytest.fixture(scope="module")
def probe_opcodes() -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    for cu in sorted(PROBES.glob("*.cu")):
        res = compile_candidate(cu.read_text(), "-gencode=arch=compute_90a,code=sm_90a")
        assert res.ok, f"{cu.name}: {res.message}\n{res.log}"
        out[cu.name] = disassemble(Path(res.library_path)).opcodes()
    return out


def test_every_verifiable_row_is_seen_in_its_probe(probe_opcodes):
    missing = []
    for row in table():
        if not row.verifiable:
            assert not row.sass, f"{row.ptx}: unverifiable rows carry no SASS patterns"
            assert row.note, f"{row.ptx}: say why it cannot be verified"
            continue
        assert row.probe, f"{row.ptx}: a verifiable row names its probe kernel"
        file, kernel = row.probe.split(":")
        ops = probe_opcodes[file].get(kernel)
        assert ops is not None, f"{row.ptx}: probe kernel {kernel} not in {file}"
        if not any(row.matches(op) for op in ops):
            missing.append(f"{row.ptx}: none of {row.sass} in {kernel}: {sorted(ops)}")
    assert not missing, "\n".join(missing)


def test_rows_do_not_claim_each_others_opcodes(probe_opcodes):
    # a TMA store must not count as a TMA load, a plain arrive not as arrive.expect_tx, etc.
    load, store = (
        resolve("cp.async.bulk.tensor.shared::cluster.global"),
        resolve("cp.async.bulk.tensor.global.shared::cta"),
    )
    assert load.matches("UTMALDG.2D") and not load.matches("UTMASTG.2D")
    assert store.matches("UTMASTG.2D") and not store.matches("UTMALDG.2D")
    assert not resolve("mbarrier.arrive.expect_tx").matches("SYNCS.ARRIVE.TRANS64.A1T0")
    assert resolve("cp.async").matches("LDGSTS.E.128") and not resolve("cp.async").matches("UBLKCP.S.G")
    assert not resolve("redux.sync").matches("REDUX_X")


def test_prefix_requirement_unions_rows():
    req = resolve("cp.async.bulk.tensor")
    assert {"UTMALDG.2D", "UTMASTG.2D"} <= {op for op in ("UTMALDG.2D", "UTMASTG.2D") if req.matches(op)}
    with pytest.raises(UnknownInstruction, match="not in the opcode table"):
        resolve("tcgen05.mma")


def test_opcode_of_strips_guards():
    assert opcode_of("@!P1 REDUX.MAX UR8, R2") == "REDUX.MAX"
    assert opcode_of("@!UP0 SYNCS.EXCH.64 URZ, [UR6], UR4") == "SYNCS.EXCH.64"
    assert opcode_of("      REDUX.SUM.S32 UR4, R2") == "REDUX.SUM.S32"


def test_table_names_are_unique():
    counts = defaultdict(int)
    for r in table():
        counts[r.ptx] += 1
    assert all(v == 1 for v in counts.values())
