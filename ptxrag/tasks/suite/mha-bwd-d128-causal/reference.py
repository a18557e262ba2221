"""Multi-head attention backward (head dim 128, softmax scale 1/sqrt(D)), given the forward's o and lse.

reference(): the float64 definition, computed a few heads at a time so that one chunk's score-sized matrices
(S, P, dP, dS: four of them) stay near 0.5 GB each even at the timing shape (B=4, H=48, S=4096):
    P = exp(scale q k^T - lse)   (causal: 0 above the diagonal)      D = rowsum(do * o)
    dv = P^T do    dP = do v^T    dS = P * (dP - D)    dq = scale dS k    dk = scale dS^T q
baseline(): cuDNN's fused attention backward through PyTorch, only the backward: the op
aten._scaled_dot_product_cudnn_attention_backward, which F.scaled_dot_product_attention's autograd calls under
sdpa_kernel(SDPBackend.CUDNN_ATTENTION), called directly with the task's o and lse (autograd would first run
the forward and use its own o and lse). lse goes in as [B, H, S, 1], the softmax-stats layout of cuDNN.
On a CPU (the suite's CPU test) the baseline is PyTorch's CPU flash backward, which also takes o and lse.
"""

import math

import torch

CAUSAL = True

#: elements of one chunk's score matrix (float64: 0.5 GB)
_CHUNK_ELEMENTS = 1 << 26

#: per-device int64 zeros handed to cuDNN as the (unused: dropout 0) philox seed and offset
_PHILOX: dict = {}


def reference(inputs, scalars):
    q, k, v, o, do, lse = (inputs[n] for n in ("q", "k", "v", "o", "do", "lse"))
    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    qf, kf, vf, of, dof = (x.reshape(b * h, s, d) for x in (q, k, v, o, do))
    lf = lse.reshape(b * h, s)
    dq, dk, dv = (torch.empty_like(qf) for _ in range(3))
    above = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1) if CAUSAL else None
    per = max(1, _CHUNK_ELEMENTS // (s * s))
    for i in range(0, b * h, per):
        j = slice(i, i + per)
        p = torch.matmul(qf[j], kf[j].transpose(1, 2)) * scale
        p.sub_(lf[j][..., None]).exp_()
        if above is not None:
            p.masked_fill_(above, 0.0)
        dv[j] = torch.matmul(p.transpose(1, 2), dof[j])
        ds = torch.matmul(dof[j], vf[j].transpose(1, 2))
        ds.sub_((dof[j] * of[j]).sum(-1, keepdim=True)).mul_(p)
        del p
        dq[j] = torch.matmul(ds, kf[j]) * scale
        dk[j] = torch.matmul(ds.transpose(1, 2), qf[j]) * scale
        del ds
    return {"dq": dq.reshape(b, h, s, d), "dk": dk.reshape(b, h, s, d), "dv": dv.reshape(b, h, s, d)}


def baseline(inputs, scalars):
    q, k, v, o, do, lse = (inputs[n] for n in ("q", "k", "v", "o", "do", "lse"))
    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    if q.is_cuda:
        if q.device not in _PHILOX:
            _PHILOX[q.device] = torch.zeros(1, dtype=torch.int64, device=q.device)
        zero = _PHILOX[q.device]
        dq, dk, dv = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            do, q, k, v, o, lse.unsqueeze(-1), zero, zero, None, None, None, s, s, 0.0, CAUSAL, scale=scale
        )
    else:
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            do, q, k, v, o, lse, 0.0, CAUSAL, scale=scale
        )
    return {"dq": dq, "dk": dk, "dv": dv}
