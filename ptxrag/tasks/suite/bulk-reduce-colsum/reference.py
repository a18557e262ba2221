import torch


def reference(inputs, scalars):
    return {"y": inputs["x"].sum(dim=0)}


def baseline(inputs, scalars):
    return {"y": torch.sum(inputs["x"], dim=0)}
