"""Standalone H200 harness for the mha-fwd-lse-d128 tasks (run by a20-device.sh; not part of the package).

  python3 a20-mha-fwd-harness.py check TASK SO... [--time] [--big]  correctness of compiled candidates on the
      task's check shapes against the task's float64 reference (and, with --big, at the timing shape), then with
      --time each one's median time at b=4 h=48 s = 4096 and 2048
  python3 a20-mha-fwd-harness.py baseline TASK...                   cuDNN: API/schema, which kernels ran, accuracy
      against the float64 reference on the check shapes, timing of the aten op, F.sdpa(CUDNN) and F.sdpa(FLASH)

Every line printed is one JSON object (incremental: a later crash or timeout keeps what came before). Candidates
are called through the ABI's ctypes mirror (ptxrag/sandbox/gpu/abi.py, loaded by path: standard library only).
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
import time
import tomllib
from functools import partial
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "ptxrag" / "tasks" / "suite"


def emit(**kw) -> None:
    print(json.dumps(kw), flush=True)


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


abi = load_module(REPO / "ptxrag" / "sandbox" / "gpu" / "abi.py", "ptxrag_abi_mirror")


def task_info(task: str):
    spec = tomllib.loads((SUITE / task / "task.toml").read_text())
    ref = load_module(SUITE / task / "reference.py", f"ref_{task.replace('-', '_')}")
    return spec, ref


def make_inputs(b: int, h: int, s: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return {
        n: torch.randn(b, h, s, 128, generator=g, device="cuda").to(torch.bfloat16) for n in ("q", "k", "v")
    }


def reference(ref, inputs):
    with torch.no_grad():
        out = ref.reference({k: v.double() for k, v in inputs.items()}, {})
    torch.cuda.synchronize()
    return out


def compare(name: str, out: torch.Tensor, r: torch.Tensor, tol: dict) -> dict:
    o = out.double()
    err = (o - r).abs()
    allowed = tol["atol"] + tol["rtol"] * r.abs()
    nan = int(torch.isnan(o).sum())
    ratio = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err / allowed)
    worst = int(torch.argmax(ratio))
    idx = [int(i) for i in torch.unravel_index(torch.tensor(worst), out.shape)]
    return {
        "output": name,
        "passed": bool((ratio <= 1).all()),
        "max_err_over_allowed": float(ratio.max()),
        "max_abs_err": float(err[~torch.isnan(err)].max()) if nan < err.numel() else None,
        "mismatches": int((ratio > 1).sum()),
        "nan": nan,
        "worst_index": idx,
        "worst_value": float(o.flatten()[worst]),
        "expected": float(r.flatten()[worst]),
    }


class Candidate:
    def __init__(self, so: str) -> None:
        self.lib, self.fn = abi.load_candidate(so)

    def __call__(self, inputs, o: torch.Tensor, lse: torch.Tensor) -> int:
        ins = [
            abi.make_tensor(x.data_ptr(), "bfloat16", list(x.shape), list(x.stride()))
            for x in inputs.values()
        ]
        outs = [
            abi.make_tensor(o.data_ptr(), "bfloat16", list(o.shape), list(o.stride())),
            abi.make_tensor(lse.data_ptr(), "float32", list(lse.shape), list(lse.stride())),
        ]
        call = abi.Call(ins, outs, [], torch.cuda.current_stream().cuda_stream)
        return int(self.fn(call.args))


def outputs_for(b: int, h: int, s: int):
    o = torch.full((b, h, s, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((b, h, s), float("nan"), dtype=torch.float32, device="cuda")
    return o, lse


def bench(fn, reps: int = 20, warmup: int = 3) -> float:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + reps):
        flush.zero_()
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def flops(b: int, h: int, s: int, causal: bool) -> float:
    return 4.0 * b * h * s * s * 128 / (2 if causal else 1)


def cmd_check(task: str, sos: list[str], timed: bool, big: bool) -> int:
    """Each candidate on every check shape (the same inputs and one reference per shape for all of them)."""
    spec, ref = task_info(task)
    causal = bool(ref.CAUSAL)
    tol = spec["tolerance"]
    cands = {so: Candidate(so) for so in sos}
    shapes = list(spec["shapes"]["check"]) + ([spec["shapes"]["timing"]] if big else [])
    ok = True
    for i, d in enumerate(shapes):
        b, h, s = d["b"], d["h"], d["s"]
        inputs = make_inputs(b, h, s, 1000 + i)
        r = reference(ref, inputs)
        for so, cand in cands.items():
            o, lse = outputs_for(b, h, s)
            t0 = time.perf_counter()
            rc = cand(inputs, o, lse)
            torch.cuda.synchronize()
            res = {
                "so": Path(so).name,
                "task": task,
                "shape": d,
                "rc": rc,
                "call_s": round(time.perf_counter() - t0, 4),
            }
            if rc != 0:
                emit(**res, passed=False, error=abi.describe_rc(rc))
                ok = False
                continue
            checks = [compare("o", o, r["o"], tol), compare("lse", lse, r["lse"], tol)]
            res["passed"] = all(c["passed"] for c in checks)
            ok &= res["passed"]
            emit(**res, checks=checks)
        del r
    if timed:
        for s in (4096, 2048):
            b, h = 4, 48
            inputs = make_inputs(b, h, s, 7)
            o, lse = outputs_for(b, h, s)
            for so, cand in cands.items():
                ms = bench(partial(cand, inputs, o, lse))
                emit(
                    so=Path(so).name,
                    task=task,
                    timing={"b": b, "h": h, "s": s},
                    median_ms=round(ms, 4),
                    tflops=round(flops(b, h, s, causal) / ms / 1e9, 1),
                )
    return 0 if ok else 1


def cmd_baseline(task: str) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    spec, ref = task_info(task)
    causal = bool(ref.CAUSAL)
    tol = spec["tolerance"]
    emit(
        task=task,
        torch=torch.__version__,
        cudnn=torch.backends.cudnn.version(),
        gpu=torch.cuda.get_device_name(),
        schema=str(torch.ops.aten._scaled_dot_product_cudnn_attention.default._schema),
    )
    # which kernels the baseline launches
    inputs = make_inputs(4, 48, 1024, 3)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            ref.baseline(inputs, {})
            torch.cuda.synchronize()
        kernels = sorted({e.name for e in prof.events() if str(e.device_type).endswith("CUDA")})
        emit(task=task, baseline_kernels=kernels[:8])
    except Exception as e:  # the profiler is evidence, not a requirement
        emit(task=task, baseline_kernels=f"profiler failed: {e!r}"[:300])
    for i, d in enumerate(spec["shapes"]["check"]):
        b, h, s = d["b"], d["h"], d["s"]
        inputs = make_inputs(b, h, s, 1000 + i)
        r = reference(ref, inputs)
        out = ref.baseline(inputs, {})
        checks = [compare("o", out["o"], r["o"], tol), compare("lse", out["lse"], r["lse"], tol)]
        emit(
            task=task,
            who="cudnn (task baseline)",
            shape=d,
            lse_shape=list(out["lse"].shape),
            o_strides=list(out["o"].stride()),
            passed=all(c["passed"] for c in checks),
            checks=checks,
        )
    for s in (4096, 2048):
        b, h = 4, 48
        x = make_inputs(b, h, s, 7)
        q, k, v = x["q"], x["k"], x["v"]
        times = {"aten_cudnn_lse": bench(partial(ref.baseline, x, {}))}
        for name, backend in (
            ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
            ("sdpa_flash2", SDPBackend.FLASH_ATTENTION),
        ):
            try:
                with sdpa_kernel(backend):
                    times[name] = bench(partial(sdpa, q, k, v, is_causal=causal))
            except RuntimeError as e:
                times[name] = f"unavailable: {str(e)[:120]}"
        emit(
            task=task,
            timing={"b": b, "h": h, "s": s},
            median_ms={k: (round(t, 4) if isinstance(t, float) else t) for k, t in times.items()},
            tflops={
                k: round(flops(b, h, s, causal) / t / 1e9, 1)
                for k, t in times.items()
                if isinstance(t, float)
            },
        )
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "check":
        sos = [a for a in argv[2:] if not a.startswith("--")]
        return cmd_check(argv[1], sos, "--time" in argv, "--big" in argv)
    if argv[0] == "baseline":
        return max(cmd_baseline(t) for t in argv[1:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
