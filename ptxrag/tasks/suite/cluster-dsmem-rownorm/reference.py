import torch


def reference(inputs, scalars):
    x = inputs["x"]
    return {"y": x / torch.sqrt((x * x).sum(dim=1, keepdim=True))}


def baseline(inputs, scalars):
    return {"y": torch.nn.functional.normalize(inputs["x"], dim=1)}
