import torch


def reference(inputs, scalars):
    return {"y": inputs["x"].to(torch.int64).sum().to(torch.int32).reshape(1)}


def baseline(inputs, scalars):
    return {"y": torch.sum(inputs["x"], dtype=torch.int32).reshape(1)}
