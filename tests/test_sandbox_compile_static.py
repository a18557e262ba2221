"""Compile and static stages on real nvcc + cuobjdump (CPU only)."""

from __future__ import annotations

import pytest

from ptxrag.sandbox import Sandbox
from ptxrag.sandbox.compile import compile_candidate, trim_log
from ptxrag.sandbox.static import forbidden_hits, parse_sass, static_check
from ptxrag.tasks import load_task

GENCODE = "-gencode=arch=compute_90a,code=sm_90a"

MINIMAL = r"""
#include "ptxrag_abi.h"
__global__ void k(float* y) { y[threadIdx.x] = 1.f; }
extern "C" int ptxrag_launch(const ptxrag_args* a) {
  k<<<1, 32, 0, a->stream>>>((float*)a->outputs[0].data);
  return (int)cudaGetLastError();
}
"""


def test_abi_header_compiles_into_a_shared_library():
    res = compile_candidate(MINIMAL, GENCODE, use_cache=False)
    assert res.status == "passed", res.log
    assert res.library_path and res.library_path.endswith(".so")
    assert "-shared" in res.command and GENCODE in res.command


def test_the_library_holds_one_device_image_per_target():
    """No empty device-link cubin beside the real one: each disassembly would pay nvdisasm's start-up for it
    (a -shared build without --no-device-link embeds two sm_90a images, the first with no function)."""
    from pathlib import Path

    from ptxrag.sandbox.static import run_tool
    from ptxrag.sandbox.toolchain import require_cuobjdump

    res = compile_candidate(MINIMAL + "// one image\n", GENCODE, use_cache=False)
    assert res.ok and res.library_path
    rc, out = run_tool(
        require_cuobjdump(), ["--list-elf"], Path(res.library_path), 60.0, "cuobjdump --list-elf"
    )
    assert rc == 0, out
    images = [ln for ln in out.splitlines() if ln.startswith("ELF file")]
    assert len(images) == 1 and "sm_90a" in images[0], out


def test_compile_cache_hit_on_same_source_and_flags():
    first = compile_candidate(MINIMAL + "// v2\n", GENCODE)
    second = compile_candidate(MINIMAL + "// v2\n", GENCODE)
    assert first.ok and second.ok
    assert second.cache_hit and not first.cache_hit
    assert second.library_path == first.library_path
    other_target = compile_candidate(MINIMAL + "// v2\n", "-gencode=arch=compute_90,code=sm_90")
    assert not other_target.cache_hit


def test_an_entry_published_by_another_process_meanwhile_is_used(monkeypatch: pytest.MonkeyPatch):
    """Two compiles of one source race: the other publishes its entry between our check and our rename (which
    then fails: the target folder is not empty). Ours is dropped and the result points at theirs."""
    import os
    import shutil

    from ptxrag.sandbox import compile as compile_mod

    real_replace = os.replace

    def other_process_first(src: str, dst: str) -> None:
        shutil.copytree(src, dst)  # the other process's identical entry lands first
        real_replace(src, dst)  # ours: fails, the folder exists and is not empty

    monkeypatch.setattr(compile_mod.os, "replace", other_process_first)
    res = compile_candidate(MINIMAL + "// raced\n", GENCODE)
    assert res.ok and res.library_path and os.path.isfile(res.library_path), res.message
    entry = os.path.dirname(res.library_path)
    assert not [p for p in os.listdir(os.path.dirname(entry)) if ".tmp" in p]  # our copy is gone


def test_compile_error_is_trimmed_to_what_matters():
    bad = MINIMAL.replace("y[threadIdx.x] = 1.f;", "y[threadIdx.x] = undefined_name + 1.f;")
    res = compile_candidate(bad, GENCODE, use_cache=False)
    assert res.status == "failed"
    assert "undefined_name" in res.message
    assert "candidate.cu" in res.log and "/tmp/" not in res.log
    assert "ptxrag-compile-" not in res.log


def test_ptxas_error_on_wrong_target_is_reported():
    # wgmma needs sm_90a; on plain sm_90 ptxas rejects it
    src = MINIMAL.replace(
        "y[threadIdx.x] = 1.f;",
        'asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); y[threadIdx.x] = 1.f;',
    )
    res = compile_candidate(src, "-gencode=arch=compute_90,code=sm_90", use_cache=False)
    assert res.status == "failed"
    assert "wgmma" in res.log


def test_ptxas_temp_paths_become_the_candidate_name():
    log = "ptxas /tmp/tmpxft_00002c08_00000000-6_candidate.ptx, line 112; error   : Unknown modifier '.i32'"
    assert trim_log(log) == "ptxas candidate.ptx, line 112; error   : Unknown modifier '.i32'"


def test_trim_log_keeps_errors_and_drops_noise():
    log = "\n".join(
        ["/tmp/x/candidate.cu(3): warning #177-D: unused"]
        + ['/tmp/x/candidate.cu(10): error: identifier "foo" is undefined', "    foo();", "    ^"]
        + [f"ptxas info    : line {i}" for i in range(100)]
    )
    out = trim_log(log, "/tmp/x")
    assert out.splitlines()[0] == 'candidate.cu(10): error: identifier "foo" is undefined'
    assert "warning" not in out and "ptxas info" not in out


def test_static_stage_finds_the_required_instruction():
    task = load_task("warp-reduce-redux")
    comp = compile_candidate(task.solution_source(), task.gencode)
    st = static_check(
        task.solution_source(), __import__("pathlib").Path(comp.library_path), ["redux.sync"], task.forbidden
    )
    assert st.status == "passed", st.message
    assert st.instructions[0].sass_found == ["REDUX.SUM.S32"]
    assert "row_sum" in " ".join(st.kernels)


@pytest.mark.parametrize(
    ("task_id", "control", "stage", "words"),
    [
        ("warp-reduce-redux", "controls/shuffle_only.cu", "static", "not found in the compiled SASS"),
        ("warp-reduce-redux", "controls/cublas_call.cu", "static", "cublas"),
        ("bulk-copy-scale", "controls/plain_loads.cu", "static", "cp.async.bulk.shared::cluster.global"),
    ],
)
def test_cpu_detectable_controls_fail_where_declared(task_id, control, stage, words):
    task = load_task(task_id)
    rep = Sandbox(gpu=None).evaluate(task, task.path(control).read_text())
    assert rep.first_failure is not None and rep.first_failure.stage == stage
    assert words in rep.first_failure.message
    assert not rep.success


def test_without_gpu_the_gpu_stages_are_skipped_never_passed():
    task = load_task("bulk-copy-scale")
    rep = Sandbox(gpu=None).evaluate(task, task.solution_source())
    assert rep.compile.ok and rep.static.ok
    for s in (rep.correctness, rep.execution, rep.timing):
        assert s.status == "skipped" and s.message == "skipped: no GPU"
    assert rep.success is False


def test_forbidden_scan_ignores_comments_but_not_code():
    task_forbidden = ["cublas", "torch", "dlopen", "cutlass"]
    assert forbidden_hits("// cuBLAS would be faster\n/* cublasSgemm */ int x;", None, task_forbidden) == []
    assert forbidden_hits("#include <cutlass/gemm.h>\n", None, task_forbidden)[0].startswith("cutlass")
    assert forbidden_hits('void* h = dlopen("libcublas.so", 2);', None, task_forbidden)
    assert forbidden_hits("#include <ATen/ATen.h>", None, task_forbidden)[0].startswith("torch")


def test_parse_sass_splits_kernels_and_keeps_predicates():
    text = """
        code for sm_90a
                Function : kern_a
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                    /* 0x00000a00ff017b82 */
        /*00c0*/              @!P1 REDUX.MAX UR8, R2 ;                     /* 0x00000000020883c4 */
                                                                           /* 0x000fe20000000000 */
                Function : kern_b
        /*0250*/                   UTMALDG.2D [UR4], [UR10] ;              /* 0x000000040a0075b4 */
    """
    sass = parse_sass(text)
    assert list(sass.kernels) == ["kern_a", "kern_b"]
    assert sass.kernels["kern_a"] == ["LDC R1, c[0x0][0x28]", "@!P1 REDUX.MAX UR8, R2"]
    assert sass.opcodes()["kern_b"] == {"UTMALDG.2D"}
