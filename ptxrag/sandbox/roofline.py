"""The fastest a task's timing shape can run on a GPU: bytes moved over HBM bandwidth and FLOPs over peak rate.

A candidate timed below this bound did not do the work (cached, skipped, or computed elsewhere), so the timing
stage fails it; a speedup is never merely "flagged". The bound is deliberately optimistic (vendor peak numbers,
every input and output touched exactly once), so an honest kernel is always slower than it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxrag.base.expr import evaluate

#: name fragment -> (HBM bytes/s, dense tensor FLOP/s per operand type, CUDA-core fp32 FLOP/s); vendor peaks
_PEAKS: dict[str, tuple[float, dict[str, float], float]] = {
    "H200": (4.8e12, {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12, "tf32": 494.7e12, "fp64": 66.9e12}, 66.9e12),
    "H100": (3.35e12, {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12, "tf32": 494.7e12, "fp64": 66.9e12}, 66.9e12),
}  # fmt: skip

_DTYPE_BYTES = {
    "float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "uint32": 4, "int16": 2,
}  # fmt: skip


@dataclass(frozen=True)
class Bound:
    seconds: float
    bytes_moved: float
    flops: float
    explain: str


def peaks_for(gpu_name: str) -> tuple[float, dict[str, float], float] | None:
    for key, peaks in _PEAKS.items():
        if key in gpu_name:
            return peaks
    return None


def tensor_bytes(shape: list[int | str], dtype: str, dims: dict[str, int]) -> float:
    n = 1
    for d in shape:
        n *= d if isinstance(d, int) else dims[d]
    return float(n * _DTYPE_BYTES.get(dtype, 4))


def lower_bound(
    gpu_name: str,
    dims: dict[str, int],
    tensors: list[tuple[list[int | str], str]],
    *,
    bytes_expr: str | None = None,
    flops_expr: str | None = None,
    flops_type: str = "bf16",
) -> Bound | None:
    """The roofline time of one call at ``dims`` on ``gpu_name``; None when the GPU's peaks are unknown."""
    peaks = peaks_for(gpu_name)
    if peaks is None:
        return None
    hbm, tensor, fp32 = peaks
    nbytes = evaluate(bytes_expr, dims) if bytes_expr else sum(tensor_bytes(s, t, dims) for s, t in tensors)
    flops = evaluate(flops_expr, dims) if flops_expr else 0.0
    rate = tensor.get(flops_type, fp32)
    t_mem, t_flop = nbytes / hbm, flops / rate
    parts = [f"{nbytes / 1e6:.1f} MB at {hbm / 1e12:.2f} TB/s = {t_mem * 1e3:.4f} ms"]
    if flops:
        parts.append(
            f"{flops / 1e9:.1f} GFLOP at {rate / 1e12:.0f} TFLOP/s ({flops_type}) = {t_flop * 1e3:.4f} ms"
        )
    return Bound(max(t_mem, t_flop), nbytes, flops, "; ".join(parts))
