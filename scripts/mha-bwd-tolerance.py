"""Derive the mha-bwd tolerances: emulate the reference kernel's numerics on the CPU and compare with float64.

The emulated kernel (solution.cu's arithmetic): bf16 inputs; S = q k^T and dP = do v^T in float32; P =
2^(S log2(e)/sqrt(D) - lse log2(e)) in float32; D = rowsum(do * o) in float32; dS = P (dP - D) in float32; P
and dS rounded to bf16 before the three gradient GEMMs (float32 accumulation); dq accumulated in float32 and
scaled once; every output rounded to bf16. Inputs are drawn like the task's (normal(0, 1), lse uniform).
Prints, per output and shape, max |ref|, rms |ref|, max |err| and the smallest atol that passes with the
task's rtol. Run: python scripts/mha-bwd-tolerance.py (a minute on one core).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-2


def _load(task: str):
    spec = importlib.util.spec_from_file_location(task, ROOT / "ptxrag/tasks/suite" / task / "reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def emulate(x: dict[str, torch.Tensor], causal: bool, drop_diagonal: bool = False) -> dict[str, torch.Tensor]:
    """The kernel's numerics; drop_diagonal (tests) also masks key i of query i, one key per row: what a causal
    mask off by one does, and the smallest damage a tolerance must still see."""
    q, k, v, o, do, lse = (x[n].float() for n in ("q", "k", "v", "o", "do", "lse"))
    d = q.shape[-1]
    sl2 = math.log2(math.e) / math.sqrt(d)
    s = torch.matmul(q, k.transpose(-1, -2))
    p = torch.exp2(s * sl2 - (lse * math.log2(math.e))[..., None])
    if causal:
        p = p.masked_fill(torch.ones_like(p, dtype=torch.bool).triu(1), 0.0)
    if drop_diagonal:
        p = p.masked_fill(torch.eye(p.shape[-1], dtype=torch.bool), 0.0)
    dp = torch.matmul(do, v.transpose(-1, -2))
    ds = p * (dp - (do * o).sum(-1, keepdim=True))
    pb, dsb = p.bfloat16().float(), ds.bfloat16().float()
    out = {
        "dv": torch.matmul(pb.transpose(-1, -2), do),
        "dk": torch.matmul(dsb.transpose(-1, -2), q) / math.sqrt(d),
        "dq": torch.matmul(dsb, k) / math.sqrt(d),
    }
    return {n: t.bfloat16() for n, t in out.items()}


def main() -> int:
    torch.manual_seed(7)
    lo, hi = 4.0, 8.0
    for task, causal in (("mha-bwd-d128", False), ("mha-bwd-d128-causal", True)):
        ref_mod = _load(task)
        for bh, s in ((2, 4096), (8, 1000), (16, 77)):
            x = {n: torch.randn(1, bh, s, 128).bfloat16() for n in ("q", "k", "v", "o", "do")}
            x["lse"] = torch.rand(1, bh, s) * (hi - lo) + lo
            ref = ref_mod.reference({n: t.double() for n, t in x.items()}, {})
            emu = emulate(x, causal)
            base = ref_mod.baseline(x, {})
            for name in ("dq", "dk", "dv"):
                r = ref[name]
                for label, got in (("kernel-emulation", emu[name]), ("cpu-baseline", base[name])):
                    err = (got.double() - r).abs()
                    need = float((err - RTOL * r.abs()).clamp(min=0).max())
                    print(
                        f"{task:20s} bh={bh:2d} s={s:4d} {name} {label:16s} max|ref|={float(r.abs().max()):8.3f} "
                        f"rms={float(r.pow(2).mean().sqrt()):7.3f} max|err|={float(err.max()):.3e} "
                        f"atol needed at rtol {RTOL:g}: {need:.3e}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
