import torch


def reference(inputs, scalars):
    x = inputs["x"]
    return {"y": x + torch.roll(x, -1, dims=1)}


def baseline(inputs, scalars):
    x = inputs["x"]
    return {"y": torch.roll(x, -1, dims=1) + x}
