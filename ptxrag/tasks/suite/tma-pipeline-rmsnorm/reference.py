import torch


def reference(inputs, scalars):
    x = inputs["x"]
    return {"y": x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + scalars["eps"]) * inputs["w"]}


def baseline(inputs, scalars):
    x = inputs["x"]
    return {"y": torch.nn.functional.rms_norm(x, (x.shape[-1],), inputs["w"], scalars["eps"])}
