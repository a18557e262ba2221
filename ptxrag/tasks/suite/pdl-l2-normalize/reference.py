import torch


def reference(inputs, scalars):
    x = inputs["x"]
    return {"y": x / torch.sqrt((x * x).sum())}


def baseline(inputs, scalars):
    x = inputs["x"]
    return {"y": x / torch.linalg.vector_norm(x)}
