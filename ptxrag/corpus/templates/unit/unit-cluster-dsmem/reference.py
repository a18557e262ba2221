def reference(inputs, scalars):
    x = inputs["x"]
    return {"y_sum": x.sum(dim=1), "y_max": x.amax(dim=1), "y_min": x.amin(dim=1)}


def baseline(inputs, scalars):
    x = inputs["x"]
    return {"y_sum": x.sum(dim=1), "y_max": x.amax(dim=1), "y_min": x.amin(dim=1)}
