"""The PTX template header compiles for sm_90a with every wrapper instantiated, its instructions reach SASS,
and every unit kernel (ptxrag/corpus/templates/unit) passes the sandbox's static stage. Needs nvcc and cuobjdump
(the pip toolchain), no GPU."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ptxrag.corpus.files import package_dir
from ptxrag.sandbox.compile import abi_include_dir, compile_candidate
from ptxrag.sandbox.opcodes import resolve
from ptxrag.sandbox.static import disassemble, static_check
from ptxrag.sandbox.toolchain import toolchain
from ptxrag.tasks.loader import list_tasks, load_task_dir

TEMPLATES = package_dir() / "templates"
UNIT = TEMPLATES / "unit"
UNITS = sorted(p.name for p in UNIT.iterdir() if (p / "task.toml").is_file())
GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
WGMMA_NS = (8, 16, 32, 64, 96, 128, 192, 256)

# Every verifiable instruction a wrapper of the header emits (opcode-table names), expected in the SASS of
# tools/instantiate_all.cu.
HEADER_INSTRUCTIONS = [
    "mbarrier.init", "mbarrier.arrive", "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity", "mbarrier.try_wait",
    "fence.proxy.async", "cp.async.bulk.shared::cluster.global", "cp.async.bulk.global.shared::cta",
    "cp.reduce.async.bulk.global.shared::cta", "cp.async.bulk.commit_group", "cp.async.bulk.shared::cluster.shared::cta",
    "cp.async.bulk.tensor.shared::cluster.global", "cp.async.bulk.tensor.shared::cluster.global.multicast::cluster",
    "cp.async.bulk.tensor.global.shared::cta", "cp.reduce.async.bulk.tensor.global.shared::cta",
    "cp.async.bulk.prefetch.tensor", "prefetch.tensormap", "wgmma.mma_async", "wgmma.fence", "wgmma.wait_group",
    "stmatrix", "ldmatrix", "elect.sync", "redux.sync", "setmaxnreg.inc", "setmaxnreg.dec", "barrier.cluster.arrive",
    "barrier.cluster.wait", "st.async", "griddepcontrol.wait", "griddepcontrol.launch_dependents",
]  # fmt: skip


@pytest.fixture(scope="module")
def all_sass(tmp_path_factory: pytest.TempPathFactory):
    """tools/instantiate_all.cu compiled to a cubin for sm_90a and disassembled."""
    tc = toolchain()
    out = tmp_path_factory.mktemp("templates") / "all.cubin"
    cmd = [str(tc.nvcc), GENCODE, "-O3", "-std=c++17", "-cubin", f"-I{abi_include_dir()}", f"-I{TEMPLATES}",
           "-o", str(out), str(TEMPLATES / "tools" / "instantiate_all.cu")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return disassemble(out), proc.stdout + proc.stderr


def test_generated_wgmma_headers_are_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_wgmma", TEMPLATES / "tools" / "gen_wgmma.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path, text in gen.outputs().items():
        assert path.read_text() == text, (
            f"{path.name} is stale: run python ptxrag/corpus/templates/tools/gen_wgmma.py"
        )


def test_every_wrapper_is_instantiated_by_the_test_translation_unit():
    tu = (TEMPLATES / "tools" / "instantiate_all.cu").read_text()
    names = set()
    for header in (TEMPLATES / "ptxrag_sm90").glob("*.cuh"):
        names |= set(re.findall(r"__(?:device|host)__[\w\s]*?\s(\w+)\s*\(", header.read_text()))
    names = {n for n in names if not n.startswith("wgmma_m64n")}  # reached through wgmma_bf16/f16/e4m3<N>
    assert len(names) > 60
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", tu))
    assert missing == []


def test_header_compiles_and_every_instruction_reaches_sass(all_sass):
    sass, log = all_sass
    assert "error" not in log.lower()
    ops = sass.all_opcodes()
    missing = [p for p in HEADER_INSTRUCTIONS if not any(resolve(p).matches(op) for op in ops)]
    assert missing == []


def test_every_wgmma_shape_and_dtype_is_in_sass(all_sass):
    ops = {op for op in all_sass[0].all_opcodes() if "GMMA" in op}
    for n in WGMMA_NS:
        assert f"HGMMA.64x{n}x16.F32.BF16" in ops
        assert any(op.startswith(f"HGMMA.64x{n}x16.F32") and "BF16" not in op for op in ops)  # f16
        assert any(op.startswith(f"QGMMA.64x{n}x32.F32.E4M3.E4M3") for op in ops)


def test_register_a_wgmma_reaches_sass(all_sass):
    """wgmma_bf16_rs / wgmma_f16_rs: the A operand is a register range in SASS (``HGMMA ... Rd, Ra, gdesc[..]``),
    not a second descriptor, for every N."""
    insns = [i for body in all_sass[0].kernels.values() for i in body if "GMMA" in i]
    reg_a = re.compile(r"HGMMA\.64x(\d+)x16\.F32\S* R\d+, R\d+, gdesc\[")
    ns = {int(m.group(1)) for i in insns if (m := reg_a.search(i))}
    assert ns == set(WGMMA_NS)


def test_unit_tasks_load_through_the_task_search_path(monkeypatch):
    monkeypatch.setenv("PTXRAG_TASKS_PATH", str(UNIT))
    ids = {t.id for t in list_tasks()}
    assert set(UNITS) <= ids
    assert len(UNITS) >= 12


def _sources(name: str):
    task = load_task_dir(UNIT / name)
    yield "solution", task.solution_source(), None
    for c in task.controls:
        yield c.file, task.path(c.file).read_text(), c.must_fail_at


@pytest.mark.slow
@pytest.mark.parametrize("name", UNITS)
def test_unit_kernel_passes_the_static_stage(name):
    task = load_task_dir(UNIT / name)
    assert '#include "ptxrag_sm90.cuh"' in task.solution_source()
    for label, src, must_fail_at in _sources(name):
        comp = compile_candidate(src, task.gencode)
        assert comp.status == "passed", f"{label}: {comp.message}\n{comp.log}"
        st = static_check(src, Path(comp.library_path or ""), task.required_ptx, task.forbidden)
        if must_fail_at == "static":
            assert st.status == "failed", f"{label} should fail the static stage"
        else:
            assert st.status == "passed", f"{label}: {st.message}"
            assert "C7508" not in comp.log and "C7510" not in comp.log, f"{label}: ptxas dropped setmaxnreg"
