"""CPU emulation behind docs/validation/2026-12-04-s4-mha-fwd.txt: the mismatch statistics a causal attention kernel
with the numerics of the mha-fwd-lse-d128-causal reference (fp32 scores, bf16 P, fp32 sums, bf16 o) must show when its
mask lets in one future key and key blocks above the diagonal are skipped (the causal_off_by_one control), against
the float64 reference with the task tolerance. Run: python docs/validation/2026-12-04-s4-mha-fwd-offbyone-emulation.py
"""

import math

import torch

torch.manual_seed(0)


def run(bh, s, atol=5e-3, rtol=1e-2, obo=True):
    q, k, v = (torch.randn(bh, s, 128).bfloat16() for _ in range(3))
    qd, kd, vd = q.double(), k.double(), v.double()
    sc = qd @ kd.transpose(1, 2) / math.sqrt(128)
    sc.masked_fill_(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
    lse = torch.logsumexp(sc, -1)
    o = torch.exp(sc - lse[..., None]) @ vd
    r = torch.arange(s)[:, None]
    c = torch.arange(s)[None, :]
    allowed_mask = (c <= r + (1 if obo else 0)) & (c // 128 <= r // 128)
    s32 = (q.float() @ k.float().transpose(1, 2)) * (1 / math.sqrt(128))
    s32 = s32.masked_fill(~allowed_mask, -math.inf)
    m = s32.amax(-1, keepdim=True)
    p = torch.exp(s32 - m)
    rowsum = p.sum(-1, keepdim=True)
    ok = ((p.bfloat16().float() @ v.float()) / rowsum).bfloat16().double()
    lk = (m + torch.log(rowsum)).squeeze(-1).double()
    mo = int(((ok - o).abs() > atol + rtol * o.abs()).sum())
    ml = int(((lk - lse).abs() > atol + rtol * lse.abs()).sum())
    print(
        f"bh={bh} s={s}: o mismatches {mo} ({mo / ok.numel():.4f}), lse mismatches {ml} ({ml / lk.numel():.4f}), max |o err| {(ok - o).abs().max():.3f}, max |lse err| {(lk - lse).abs().max():.3f}"
    )


run(3, 77)
run(15, 1000)
run(24, 1024)
