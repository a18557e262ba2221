def reference(inputs, scalars):
    return {"y": inputs["x"] * 2 + 1}


def baseline(inputs, scalars):
    t = inputs["x"] * 2
    return {"y": t + 1}
