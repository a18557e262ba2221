import torch


def _pair_sum(x):
    rows, cols = x.shape
    bands = (rows + 63) // 64
    xp = torch.zeros(bands * 64, cols, dtype=x.dtype, device=x.device)
    xp[:rows] = x
    v = xp.view(bands, 2, 32, cols)
    s = v[:, 0] + v[:, 1]
    return s.unsqueeze(1).expand(bands, 2, 32, cols).reshape(bands * 64, cols)[:rows]


def reference(inputs, scalars):
    return {"y": _pair_sum(inputs["x"])}


def baseline(inputs, scalars):
    return {"y": _pair_sum(inputs["x"]).contiguous()}
