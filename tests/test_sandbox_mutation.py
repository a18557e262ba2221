"""Mutation check (issue 15 class 6): PTX rewriting rules, the opcode table's mutation column, and real
mutant builds of every reference solution (nvcc + cuobjdump, no GPU)."""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ptxrag.sandbox import mutation
from ptxrag.sandbox.mutation import Mutant, build_mutants, mutate_ptx
from ptxrag.sandbox.opcodes import table
from ptxrag.sandbox.static import Sass

ROOT = Path(__file__).resolve().parents[1] / "ptxrag"
KERNELS = sorted(
    [
        *(ROOT / "tasks" / "suite").glob("*/solution.cu"),
        *(ROOT / "corpus" / "templates" / "unit").glob("*/solution.cu"),
    ]
)

DECLS = ".reg .pred %p<3>;\n.reg .b32 %r<9>;\n.reg .f32 %f<9>;\n.reg .b64 %rd<4>;\n"


def test_every_row_declares_a_mutation() -> None:
    for r in table():
        assert r.mutation in ("remove", "zero-result", "release") or r.mutation.startswith("none: "), r.ptx
        if r.mutation.startswith("none"):
            assert len(r.mutation) > len("none: ") + 10, f"{r.ptx}: say why it cannot be mutated"


def test_zero_result_scalar_with_guard_and_two_statements_per_line() -> None:
    ptx = DECLS + "\t@%p1 redux.sync.add.u32 %r5, %r4, -1; add.s32 %r6, %r5, 1;\n"
    out, n, how = mutate_ptx(ptx, "redux.sync")
    assert (n, how) == (1, "zero-result")
    assert "redux" not in out and "@%p1 mov.b32 %r5, 0;" in out and "add.s32 %r6, %r5, 1;" in out


def test_zero_result_vector_destination_keeps_types() -> None:
    ptx = DECLS + "\tldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r1, %r2}, [%rd1];\n"
    out, n, _ = mutate_ptx(ptx, "ldmatrix")
    assert n == 1 and "mov.b32 %r1, 0;" in out and "mov.b32 %r2, 0;" in out and "ldmatrix" not in out
    ptx = (
        DECLS
        + "\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4}, {%r1}, {%r2}, {%f5};\n"
    )
    out, n, _ = mutate_ptx(ptx, "mma.sync")
    assert n == 1 and all(f"mov.b32 %f{i}, 0;" in out for i in range(1, 5)) and "%f5, 0" not in out


def test_remove_matches_only_the_instruction_not_its_relatives() -> None:
    ptx = DECLS + (
        "\tcp.async.ca.shared.global [%r1], [%rd1], 16;\n\tcp.async.commit_group;\n"
        "\tcp.async.bulk.commit_group;\n\t// cp.async.ca.shared.global in a comment\n"
    )
    out, n, how = mutate_ptx(ptx, "cp.async")
    assert (n, how) == (1, "remove")
    assert "cp.async.commit_group;" in out and "cp.async.bulk.commit_group;" in out and "ca.shared" in out


def test_tensor_rows_match_despite_the_dimension_component() -> None:
    ptx = DECLS + (
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];\n"
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%r1], [%rd1, {%r2, %r3}], [%r4], %rs1;\n"
    )
    out, n, _ = mutate_ptx(ptx, "cp.async.bulk.tensor.shared::cluster.global")
    assert n == 1 and "multicast" in out


def test_release_signals_the_barrier_with_the_copy_bytes_instead_of_copying() -> None:
    ptx = DECLS + (
        "\t@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];\n"
        "\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%r1], [%rd1], 256, [%r3], %rs1;\n"
        "\tmbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r3], %r2;\n"
    )
    out, n, how = mutate_ptx(ptx, "cp.async.bulk.shared::cluster.global")
    assert (n, how) == (2, "release")
    assert "@%p1 mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%r3], %r2;" in out
    assert (
        "cp.async.bulk" not in out
    )  # the multicast form is removed (its peers' barriers cannot be signalled)
    assert (
        "mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r3], %r2;" in out
    )  # the bytes are still expected


def test_release_of_a_tensor_copy_drops_its_barriers_expected_bytes() -> None:
    ptx = DECLS + (
        "\tmbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r4], 16384;\n"
        "\tmbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r5], 512;\n"
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];\n"
        "\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r4], %r6;\n"
    )
    out, n, how = mutate_ptx(ptx, "cp.async.bulk.tensor.shared::cluster.global")
    assert (n, how) == (1, "release")
    assert "cp.async.bulk.tensor" not in out and "expect_tx" not in out
    assert "mbarrier.arrive.release.cta.shared::cta.b64 _, [%r4];" in out and "try_wait" in out


def test_release_of_async_stores_completes_their_element_bytes() -> None:
    ptx = DECLS + (
        "\tst.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r1], {%f1, %f2, %f3, %f4}, [%r2];\n"
        "\tst.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%r1], %rd1, [%r2];\n"
    )
    out, n, _ = mutate_ptx(ptx, "st.async")
    assert n == 2 and "st.async" not in out
    assert "[%r2], 16;" in out and "[%r2], 8;" in out


def _task(d: Path) -> tuple[str, list[str]]:
    t = tomllib.loads((d / "task.toml").read_text())
    return t.get("gencode", "-gencode=arch=compute_90a,code=sm_90a"), list(t["required_ptx"])


#: the parametrized test below; its module fixture builds the mutants of every selected kernel at once
_EVERY_REFERENCE = "test_every_required_instruction_of_every_reference_builds_or_is_documented"


@pytest.fixture(scope="module")
def reference_mutants(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[Path, tuple[list[Mutant], list[Path]] | BaseException]:
    """The mutants of every reference kernel this session selected, built two kernels at a time (each build
    is mostly one single-threaded nvcc, so one at a time left a core idle), with the libraries each build
    disassembled. A kernel whose build raised maps to its exception, re-raised by its own test."""
    selected = [
        item.callspec.params["solution"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == _EVERY_REFERENCE
    ]
    root = tmp_path_factory.mktemp("reference-mutants")
    dirs = {sol: root / f"{i}-{sol.parent.name}" for i, sol in enumerate(selected)}
    seen: list[Path] = []
    real = mutation.disassemble

    def counting(binary: Path, timeout_s: float | None = None) -> Sass:
        seen.append(Path(binary))  # list.append is atomic: the builds' threads share it
        return real(binary, timeout_s)

    def build(sol: Path) -> list[Mutant]:
        gencode, required = _task(sol.parent)
        return build_mutants(sol.read_text(), gencode, required, out_dir=dirs[sol])

    built: dict[Path, list[Mutant] | BaseException] = {}
    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(max_workers=2) as pool:
        mp.setattr(mutation, "disassemble", counting)
        home = tmp_path_factory.getbasetemp() / "ptxrag-home"  # conftest's home: this runs before its fixture
        home.mkdir(exist_ok=True)
        mp.setenv("PTXRAG_HOME", str(home))
        futures = {sol: pool.submit(build, sol) for sol in selected}
        for sol, fut in futures.items():
            try:
                built[sol] = fut.result()
            except Exception as e:  # reported by that kernel's test, not by the fixture
                built[sol] = e
    return {
        sol: res
        if isinstance(res, BaseException)
        else (res, [p for p in seen if p.is_relative_to(dirs[sol])])
        for sol, res in built.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("solution", KERNELS, ids=lambda p: p.parent.name)
def test_every_required_instruction_of_every_reference_builds_or_is_documented(
    solution: Path, reference_mutants: dict[Path, tuple[list[Mutant], list[Path]] | BaseException]
) -> None:
    _, required = _task(solution.parent)
    res = reference_mutants[solution]
    if isinstance(res, BaseException):
        raise res
    mutants, disassembled = res
    assert [m.instruction for m in mutants] == required
    for m in mutants:
        assert m.status in ("built", "not_mutable"), m
        if m.status == "built":
            assert m.library_path and Path(m.library_path).is_file() and m.occurrences > 0
            assert "->" in m.message
    # the original library is disassembled once, not once per mutant (cuobjdump takes about a CPU second)
    built = [Path(m.library_path) for m in mutants if m.status == "built" and m.library_path]
    originals = [p for p in disassembled if p not in built]
    assert sorted(p for p in disassembled if p in built) == sorted(built), disassembled
    assert len(originals) == (1 if built else 0), originals


DEAD = r"""
#include <cstdint>
__global__ void k(unsigned* out, int flag) {
    unsigned v = threadIdx.x;
    if (flag == 12345) { asm volatile("redux.sync.add.u32 %0, %0, 0xffffffff;" : "+r"(v)); }
    out[threadIdx.x] = v;
}
"""


@pytest.mark.slow
def test_required_instruction_in_dead_code_still_builds_a_mutant(tmp_path: Path) -> None:
    (m,) = build_mutants(DEAD, "-gencode=arch=compute_90a,code=sm_90a", ["redux.sync"], out_dir=tmp_path)
    assert m.status == "built" and m.occurrences == 1


@pytest.mark.slow
def test_a_kernel_that_waits_on_a_copy_it_never_reads_gets_a_mutant_that_does_not_hang(
    tmp_path: Path,
) -> None:
    # the release mutant: no bulk copy left in the SASS, but the barrier is still completed (no hang), so the
    # control's unchanged output is what the GPU stage sees
    from ptxrag.sandbox.static import disassemble

    task_dir = ROOT / "tasks" / "suite" / "bulk-copy-scale"
    gencode, _ = _task(task_dir)
    source = (task_dir / "controls" / "discarded_bulk_waits.cu").read_text()
    (m,) = build_mutants(source, gencode, ["cp.async.bulk.shared::cluster.global"], out_dir=tmp_path)
    assert m.status == "built" and m.how == "release", m
    text = "\n".join(i for ins in disassemble(Path(m.library_path or "")).kernels.values() for i in ins)
    assert "UBLKCP" not in text and "SYNCS.ARRIVE.TRANS64.RED" in text, text[:2000]


def test_elect_sync_has_a_zero_result_mutation_that_elects_no_lane() -> None:
    # a kernel that elects only under the profiler (lane 0 otherwise) kept its output with no mutant to run:
    # warp-elect-sum/controls/profiler_elect.cu passed. Zeroing the predicate drops the elected lane's work.
    (row,) = [r for r in table() if r.ptx == "elect.sync"]
    assert row.mutation == "zero-result"
    ptx = DECLS + "\t{\n\t.reg .pred p;\n\telect.sync _|p, %r1;\n\tselp.u32 %r2, 1, 0, p;\n\t}\n"
    out, n, how = mutate_ptx(ptx, "elect.sync")
    assert (n, how) == (1, "zero-result")
    assert "elect.sync" not in out and "mov.pred p, 0;" in out and "selp.u32 %r2, 1, 0, p;" in out
    out, n, _ = mutate_ptx(DECLS + "\t@%p2 elect.sync %r3|%p1, -1;\n", "elect.sync")
    assert n == 1 and "@%p2 mov.b32 %r3, 0;" in out and "@%p2 mov.pred %p1, 0;" in out


@pytest.mark.slow
def test_the_profiler_only_election_control_gets_a_built_elect_mutant(tmp_path: Path) -> None:
    task_dir = ROOT / "tasks" / "suite" / "warp-elect-sum"
    gencode, required = _task(task_dir)
    source = (task_dir / "controls" / "profiler_elect.cu").read_text()
    mutants = build_mutants(source, gencode, required, out_dir=tmp_path)
    assert [(m.instruction, m.status) for m in mutants] == [("elect.sync", "built"), ("redux.sync", "built")]


@pytest.mark.parametrize("outcome", ["error", "violation"])
def test_a_mutant_whose_host_code_refuses_fails_the_candidate(outcome: str, tmp_path: Path) -> None:
    """An error code with no device fault, or a forbidden behaviour, in a mutant is the host's choice (a kernel
    can tell it is a mutant: warp-reduce-redux/controls/mutant_refuses.cu); it counted as 'the output changed'."""
    from ptxrag.sandbox import SandboxConfig
    from ptxrag.sandbox.stages import mutation as stage

    class W:
        harness = work = tmp_path
        config = SandboxConfig()

        def ask(self, cmd: dict, timeout: float, what: str) -> dict:
            return {"ok": True, "outcome": outcome, "error": "ptxrag_launch returned 1"}

    lib = tmp_path / "m.so"
    lib.write_bytes(b"\x7fELF")
    status, detail = stage.run_mutant(W(), lib, 0, 5.0)  # type: ignore[arg-type]
    assert status == "host refused" and outcome in detail
    built = [Mutant("redux.sync", str(lib), "built", 1, "zero-result", "built")]
    res = stage._judge(built, W(), 5.0, 0.0)  # type: ignore[arg-type]
    assert res.status == "failed" and "did not run as the candidate does" in res.message, res.message
    for legit in ("faulted", "hung"):  # a fault or a hang is still what a removed instruction can cause
        W.ask = lambda self, cmd, timeout, what, o=legit: {"ok": True, "outcome": o, "error": "x"}  # type: ignore[method-assign]
        lib.write_bytes(b"\x7fELF")
        assert stage._judge(built, W(), 5.0, 0.0).status == "passed"  # type: ignore[arg-type]
