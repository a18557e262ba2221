"""Standalone H200 harness for the mha-bwd-d128 tasks (run by b20-device.sh; not part of the package).

  python3 b20-mha-bwd-harness.py check TASK SO... [--time]   each compiled candidate on the task's check shapes
      (inputs drawn as the task declares them, outputs poisoned with NaN, the task's workspace) against the
      task's float64 reference with each output's own tolerance; with --time, every candidate's and the
      baseline's median time at b=4 h=48 s=4096, timed by the same function
  python3 b20-mha-bwd-harness.py baseline TASK...            cuDNN backward: schema, kernels launched, accuracy
      against the float64 reference, agreement with F.sdpa(CUDNN) + autograd on o and lse from its own forward
      (so the direct call computes the real gradient), and times of the aten op, the autograd backward under
      CUDNN_ATTENTION and under FLASH_ATTENTION (backward only: the forward runs outside the timed region)

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
NAMES = ("q", "k", "v", "o", "do")


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


def tolerances(spec) -> dict[str, dict]:
    return {o["name"]: o.get("tolerance", spec["tolerance"]) for o in spec["outputs"]}


def make_inputs(spec, b: int, h: int, s: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = {n: torch.randn(b, h, s, 128, generator=g, device="cuda").to(torch.bfloat16) for n in NAMES}
    init = next(i for i in spec["inputs"] if i["name"] == "lse")["init"]
    x["lse"] = torch.rand(b, h, s, generator=g, device="cuda") * (init["high"] - init["low"]) + init["low"]
    return x


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
    def __init__(self, so: str, workspace_bytes: int) -> None:
        self.lib, self.fn = abi.load_candidate(so)
        self.ws = torch.zeros(workspace_bytes, dtype=torch.uint8, device="cuda")

    def __call__(self, inputs, outs) -> int:
        ins = [
            abi.make_tensor(
                x.data_ptr(), str(x.dtype).removeprefix("torch."), list(x.shape), list(x.stride())
            )
            for x in inputs.values()
        ]
        os_ = [abi.make_tensor(x.data_ptr(), "bfloat16", list(x.shape), list(x.stride())) for x in outs]
        call = abi.Call(
            ins, os_, [], torch.cuda.current_stream().cuda_stream, self.ws.data_ptr(), self.ws.numel()
        )
        return int(self.fn(call.args))


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
    return 10.0 * b * h * s * s * 128 / (2 if causal else 1)


def cmd_check(task: str, sos: list[str], timed: bool) -> int:
    spec, ref = task_info(task)
    causal = bool(ref.CAUSAL)
    tol = tolerances(spec)
    cands = {so: Candidate(so, spec["workspace_bytes"]) for so in sos}
    ok = True
    for i, d in enumerate(spec["shapes"]["check"]):
        b, h, s = d["b"], d["h"], d["s"]
        inputs = make_inputs(spec, b, h, s, 1000 + i)
        r = reference(ref, inputs)
        for so, cand in cands.items():
            outs = [
                torch.full((b, h, s, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
                for _ in range(3)
            ]
            t0 = time.perf_counter()
            rc = cand(inputs, outs)
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
            checks = [compare(n, o, r[n], tol[n]) for n, o in zip(("dq", "dk", "dv"), outs, strict=True)]
            res["passed"] = all(c["passed"] for c in checks)
            ok &= res["passed"]
            emit(**res, checks=checks)
        del r
    if timed:
        d = spec["shapes"]["timing"]
        b, h, s = d["b"], d["h"], d["s"]
        inputs = make_inputs(spec, b, h, s, 7)
        outs = [torch.empty((b, h, s, 128), dtype=torch.bfloat16, device="cuda") for _ in range(3)]
        base_ms = bench(partial(ref.baseline, inputs, {}))
        emit(
            task=task,
            who="baseline (cudnn bwd op)",
            median_ms=round(base_ms, 4),
            tflops=round(flops(b, h, s, causal) / base_ms / 1e9, 1),
        )
        for so, cand in cands.items():
            ms = bench(partial(cand, inputs, outs))
            emit(
                so=Path(so).name,
                task=task,
                timing=d,
                median_ms=round(ms, 4),
                tflops=round(flops(b, h, s, causal) / ms / 1e9, 1),
                vs_baseline=round(base_ms / ms, 3),
            )
    return 0 if ok else 1


def cmd_baseline(task: str) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    spec, ref = task_info(task)
    causal = bool(ref.CAUSAL)
    tol = tolerances(spec)
    emit(
        task=task,
        torch=torch.__version__,
        cudnn=torch.backends.cudnn.version(),
        gpu=torch.cuda.get_device_name(),
        schema=str(torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default._schema),
    )
    x = make_inputs(spec, 4, 48, 1024, 3)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            ref.baseline(x, {})
            torch.cuda.synchronize()
        emit(
            task=task,
            baseline_kernels=sorted({e.name for e in prof.events() if str(e.device_type).endswith("CUDA")})[
                :8
            ],
        )
    except Exception as e:  # the profiler is evidence, not a requirement
        emit(task=task, baseline_kernels=f"profiler failed: {e!r}"[:300])
    for i, d in enumerate(spec["shapes"]["check"][:2]):
        b, h, s = d["b"], d["h"], d["s"]
        inputs = make_inputs(spec, b, h, s, 1000 + i)
        r = reference(ref, inputs)
        out = ref.baseline(inputs, {})
        checks = [compare(n, out[n], r[n], tol[n]) for n in ("dq", "dk", "dv")]
        emit(
            task=task,
            who="cudnn (task baseline)",
            shape=d,
            passed=all(c["passed"] for c in checks),
            checks=checks,
        )
    # consistent o and lse (from cuDNN's own forward): the direct backward op against autograd under CUDNN
    q, k, v, do = (x[n].detach().clone() for n in ("q", "k", "v", "do"))
    fwd = torch.ops.aten._scaled_dot_product_cudnn_attention(
        q, k, v, None, True, 0.0, causal, False, scale=128**-0.5
    )
    direct = ref.baseline(
        {"q": q, "k": k, "v": v, "o": fwd[0], "do": do, "lse": fwd[1].reshape(q.shape[:3])}, {}
    )
    qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        sdpa(qa, ka, va, is_causal=causal).backward(do)
    agree = {
        n: float((direct[n].float() - g.grad.float()).abs().max())
        for n, g in (("dq", qa), ("dk", ka), ("dv", va))
    }
    emit(task=task, direct_vs_autograd_max_abs=agree, lse_shape=list(fwd[1].shape))
    d = spec["shapes"]["timing"]
    b, h, s = d["b"], d["h"], d["s"]
    x = make_inputs(spec, b, h, s, 7)
    times = {"aten_cudnn_bwd": bench(partial(ref.baseline, x, {}))}
    for name, backend in (
        ("autograd_cudnn_bwd", SDPBackend.CUDNN_ATTENTION),
        ("autograd_flash2_bwd", SDPBackend.FLASH_ATTENTION),
    ):
        try:
            qa, ka, va = (x[n].clone().requires_grad_() for n in ("q", "k", "v"))
            with sdpa_kernel(backend):
                out = sdpa(qa, ka, va, is_causal=causal)

                def back(out=out, qa=qa, ka=ka, va=va):
                    torch.autograd.grad(out, (qa, ka, va), x["do"], retain_graph=True)

                times[name] = bench(back, reps=10)
        except RuntimeError as e:
            times[name] = f"unavailable: {str(e)[:120]}"
    emit(
        task=task,
        timing=d,
        median_ms={k: (round(t, 4) if isinstance(t, float) else t) for k, t in times.items()},
        tflops={
            k: round(flops(b, h, s, causal) / t / 1e9, 1) for k, t in times.items() if isinstance(t, float)
        },
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "check":
        return cmd_check(argv[1], [a for a in argv[2:] if not a.startswith("--")], "--time" in argv)
    if argv[0] == "baseline":
        return max(cmd_baseline(t) for t in argv[1:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
