"""Tuning harness for the gemm-n7168-k5120-bf16 reference (docs/validation/g19-device.sh runs it on the H200).

Builds each variant of the task's solution.cu (compile-time knobs -D...) with nvcc into a shared library, calls
its ptxrag_launch through the ctypes ABI mirror (ptxrag/sandbox/gpu/abi.py), checks it against torch on the
timing shape and an awkward one, and times it against torch.matmul (cuBLAS) with the same CUDA-event timer
(L2 flushed before every repetition, median). Prints one line per variant as soon as it is measured.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from ptxrag.sandbox.gpu import abi  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOL = os.path.join(ROOT, "ptxrag/tasks/suite/gemm-n7168-k5120-bf16/solution.cu")
WS = os.path.join(ROOT, "ptxrag/tasks/suite/gemm-ws-setmaxnreg-bf16/solution.cu")
N, K = 7168, 5120


def build(name: str, src: str, defines: list[str], out: str) -> tuple[str, str, str]:
    so = os.path.join(out, f"{name}.so")
    if os.path.exists(so):
        return name, so, "(built before)"
    cmd = [
        os.path.join(os.environ.get("PTXRAG_CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
        "-gencode=arch=compute_90a,code=sm_90a",
        "-O3",
        "-std=c++17",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-Xptxas",
        "-v",
        "-I",
        os.path.join(ROOT, "ptxrag/sandbox/abi"),
        "-I",
        os.path.join(ROOT, "ptxrag/corpus/templates"),
        *[f"-D{d}" for d in defines],
        src,
        "-o",
        so + ".part",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0:  # only a complete library gets the name that later runs look for
        os.replace(so + ".part", so)
    log = "\n".join(
        ln
        for ln in (r.stdout + r.stderr).splitlines()
        if "spill" in ln or "Used" in ln or "arning" in ln or "rror" in ln
    )
    return name, (so if r.returncode == 0 else ""), log


def launcher(so: str):
    import torch

    _lib, fn = abi.load_candidate(so)

    def run(a, b, c) -> None:
        ts = [abi.make_tensor(t.data_ptr(), "bfloat16", list(t.shape), list(t.stride())) for t in (a, b, c)]
        call = abi.Call(ts[:2], ts[2:], [], torch.cuda.current_stream().cuda_stream)
        rc = fn(call.args)
        if rc != 0:
            raise RuntimeError(abi.describe_rc(rc))

    run.lib = _lib  # keep the library loaded
    return run


def time_ms(f, reps: int, flush) -> float:
    import torch

    times = []
    for i in range(reps + 3):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        if i >= 3:
            times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def check(run, m: int, gen) -> str:
    import torch

    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.full((m, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    run(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = (c.float() - ref).abs()
    bad = ~(err <= 2e-2 + 1e-2 * ref.abs())
    return (
        "ok"
        if not bool(bad.any())
        else f"WRONG({int(bad.sum())} bad, max err {float(err.nan_to_num(1e9).max()):.3g})"
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--variant", action="append", default=[], help="name=DEF1,DEF2 (solution.cu knobs)")
    p.add_argument("--build-only", action="store_true", help="build every variant in parallel and stop")
    p.add_argument("--with-ws", action="store_true", help="also time the gemm-ws-setmaxnreg-bf16 reference")
    args = p.parse_args()
    jobs = []
    for v in args.variant:
        name, _, defs = v.partition("=")
        jobs.append((name, SOL, [d for d in defs.split(",") if d]))
    if args.with_ws:
        jobs.append(("ws-setmaxnreg-ref", WS, []))
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(12, len(jobs))) as ex:
        built = list(ex.map(lambda j: build(j[0], j[1], j[2], args.out), jobs))
    print(f"built {len(built)} variants in {time.time() - t0:.1f} s", flush=True)
    for name, _so, log in built:
        print(f"## {name}: {log.strip() or '(no ptxas lines)'}", flush=True)
    if args.build_only:
        return
    import torch

    m = args.m
    flops = 2.0 * m * N * K
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)
    flush = torch.empty(256 * 2**20, device="cuda", dtype=torch.uint8)
    cublas_ms = time_ms(lambda: torch.matmul(a, b.t()), args.reps, flush)
    print(f"cublas  m={m}: {cublas_ms:.4f} ms  {flops / cublas_ms / 1e9:.1f} TFLOP/s", flush=True)
    for name, so, _log in built:
        if not so:
            print(f"{name}: BUILD FAILED", flush=True)
            continue
        try:
            run = launcher(so)
            ok = check(run, m, gen)
            ok_awk = check(run, 1000, gen) + "/" + check(run, 129, gen)
            ms = time_ms(lambda run=run: run(a, b, c), args.reps, flush)
            cb = time_ms(lambda: torch.matmul(a, b.t()), args.reps, flush)  # cuBLAS again, next to it
            print(
                f"{name:28s} {ms:.4f} ms  {flops / ms / 1e9:6.1f} TFLOP/s  ratio {cb / ms:.3f} "
                f"(cublas {cb:.4f} ms)  check m={m}: {ok}  m=1000/129: {ok_awk}",
                flush=True,
            )
        except Exception as e:  # a variant that fails must not stop the others
            print(f"{name}: ERROR {e}", flush=True)
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
