"""Generate corpus/templates/ptxrag_sm90/wgmma_<dtype>.cuh: one wgmma.mma_async wrapper per (dtype, N).

The accumulator operand lists are long (N/2 registers), so they are generated rather than typed.
Run: python ptxrag/corpus/templates/tools/gen_wgmma.py  (tests/test_corpus_templates.py checks the files are current).
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parents[1] / "ptxrag_sm90"
NS = (8, 16, 32, 64, 96, 128, 192, 256)
# name, PTX type suffix, K, whether imm-trans-a/imm-trans-b operands exist (only .f16/.bf16 take them)
TYPES = (("bf16", "bf16.bf16", 16, True), ("f16", "f16.f16", 16, True), ("e4m3", "e4m3.e4m3", 32, False))


def _wrapper(name: str, ptx_type: str, k: int, trans: bool, n: int) -> str:
    regs = n // 2
    d_list = ", ".join(f"%{i}" for i in range(regs))
    a, b, s = regs, regs + 1, regs + 2
    imm = f", 1, 1, %{regs + 3}, %{regs + 4}" if trans else ", 1, 1"
    outs = ",\n        ".join(
        ", ".join(f'"+f"(d[{j}])' for j in range(i, min(i + 8, regs))) for i in range(0, regs, 8)
    )
    ins = '"l"(desc_a), "l"(desc_b), "r"(scale_d)' + (', "n"(TransA), "n"(TransB)' if trans else "")
    tmpl = "template <int TransA, int TransB>\n" if trans else ""
    return (
        f"// wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}: D[64x{n}] (+)= A[64x{k}] * B[{k}x{n}].\n"
        f"{tmpl}__device__ __forceinline__ void wgmma_m64n{n}k{k}_f32_{name}(float (&d)[{regs}], uint64_t desc_a, "
        f"uint64_t desc_b, uint32_t scale_d) {{\n"
        f"  asm volatile(\n"
        f'      "{{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %{s}, 0;\\n\\t"\n'
        f'      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type} "\n'
        f'      "{{{d_list}}}, "\n'
        f'      "%{a}, %{b}, p{imm};\\n\\t}}"\n'
        f"      : {outs}\n"
        f"      : {ins}\n"
        f'      : "memory");\n'
        f"}}\n"
    )


def _wrapper_rs(name: str, ptx_type: str, k: int, n: int) -> str:
    """Register-A form (PTX ISA 9.7.15.5.2): A is four 32-bit registers holding this thread's m64nNk16 A
    fragment (8 16-bit elements; the layout of an m64n16 accumulator fragment), B a shared-memory descriptor;
    only imm-trans-b exists."""
    regs = n // 2
    d_list = ", ".join(f"%{i}" for i in range(regs))
    a, b, s = regs, regs + 4, regs + 5
    outs = ",\n        ".join(
        ", ".join(f'"+f"(d[{j}])' for j in range(i, min(i + 8, regs))) for i in range(0, regs, 8)
    )
    return (
        f"// wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}, A from registers: D[64x{n}] (+)= A[64x{k}] * "
        f"B[{k}x{n}].\n"
        "template <int TransB>\n"
        f"__device__ __forceinline__ void wgmma_m64n{n}k{k}_f32_{name}_rs(float (&d)[{regs}], const uint32_t (&a)[4], "
        f"uint64_t desc_b, uint32_t scale_d) {{\n"
        f"  asm volatile(\n"
        f'      "{{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %{s}, 0;\\n\\t"\n'
        f'      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type} "\n'
        f'      "{{{d_list}}}, "\n'
        f'      "{{%{a}, %{a + 1}, %{a + 2}, %{a + 3}}}, %{b}, p, 1, 1, %{s + 1};\\n\\t}}"\n'
        f"      : {outs}\n"
        f'      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB)\n'
        f'      : "memory");\n'
        f"}}\n"
    )


def _dispatch_rs(name: str, k: int) -> str:
    lines = [
        f"// Dispatch on N for {name} with A in registers: wgmma_{name}_rs<N, TransB>(d, a, desc_b, scale_d). The",
        "// A fragment of k-step kk of a product P = S V, S an m64nNk16 accumulator tile just computed, is",
        "// {pack(s[8kk], s[8kk+1]), pack(s[8kk+2], s[8kk+3]), pack(s[8kk+4], s[8kk+5]), pack(s[8kk+6], s[8kk+7])}",
        "// (pack_bf16x2 in warp.cuh): no shuffle needed. Do not rewrite `a` before the group's wgmma_wait_group.",
        "template <int N, int TransB = 0>",
        f"__device__ __forceinline__ void wgmma_{name}_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, "
        "uint32_t scale_d = 1) {",
    ]
    for i, n in enumerate(NS):
        kw = "if constexpr" if i == 0 else "} else if constexpr"
        lines.append(f"  {kw} (N == {n}) {{")
        lines.append(f"    wgmma_m64n{n}k{k}_f32_{name}_rs<TransB>(d, a, desc_b, scale_d);")
    lines.append("  } else {")
    lines.append(
        f'    static_assert(N == {NS[0]}, "wgmma_{name}_rs: N must be one of {", ".join(map(str, NS))}");'
    )
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dispatch(name: str, k: int, trans: bool) -> str:
    tparams = "int N, int TransA = 0, int TransB = 0" if trans else "int N"
    targs = "<TransA, TransB>" if trans else ""
    lines = [
        f"// Dispatch on N for {name}: wgmma_{name}<N{', TransA, TransB' if trans else ''}>(d, desc_a, desc_b, scale_d).",
        f"template <{tparams}>",
        f"__device__ __forceinline__ void wgmma_{name}(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, "
        "uint32_t scale_d = 1) {",
    ]
    for i, n in enumerate(NS):
        kw = "if constexpr" if i == 0 else "} else if constexpr"
        lines.append(f"  {kw} (N == {n}) {{")
        lines.append(f"    wgmma_m64n{n}k{k}_f32_{name}{targs}(d, desc_a, desc_b, scale_d);")
    lines.append("  } else {")
    lines.append(
        f'    static_assert(N == {NS[0]}, "wgmma_{name}: N must be one of {", ".join(map(str, NS))}");'
    )
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(name: str) -> str:
    """The header text for one dtype (``bf16``, ``f16`` or ``e4m3``)."""
    _, ptx_type, k, trans = next(t for t in TYPES if t[0] == name)
    guard = f"PTXRAG_SM90_WGMMA_{name.upper()}_CUH"
    head = (
        f"// ptxrag_sm90/wgmma_{name}.cuh: GENERATED by corpus/templates/tools/gen_wgmma.py; do not edit by hand.\n"
        f"// wgmma.mma_async .{ptx_type.split('.')[0]} with both operands in shared memory (descriptors) and f32\n"
        "// accumulators (PTX ISA 9.7.15.5.2). d: this thread's N/2 accumulator registers (layout: wgmma_acc_row /\n"
        "// wgmma_acc_col in wgmma.cuh). scale_d: 0 -> D = A*B (d's old values ignored), non-zero -> D = A*B + D.\n"
        + (
            "// TransA/TransB: 0 = K-major, 1 = M-major (A) / N-major (B) in shared memory. The *_rs forms take A\n"
            "// from registers (four 32-bit registers of packed 16-bit pairs) and B from shared memory.\n"
            if trans
            else "// fp8 operands must be K-major (no transpose operands for .e4m3/.e5m2).\n"
        )
        + "// Issue between wgmma_fence() and wgmma_commit_group(); read d only after wgmma_wait_group<..>().\n"
        f"#ifndef {guard}\n#define {guard}\n\n#include <cstdint>\n\nnamespace ptxrag {{\n"
    )
    parts = [head]
    parts += [_wrapper(name, ptx_type, k, trans, n) for n in NS]
    parts.append(_dispatch(name, k, trans))
    if trans:  # 16-bit types: the register-A form too (fp8 register A exists in PTX but is not wrapped here)
        parts += [_wrapper_rs(name, ptx_type, k, n) for n in NS]
        parts.append(_dispatch_rs(name, k))
    parts.append(f"}}  // namespace ptxrag\n\n#endif  // {guard}\n")
    return "\n".join(parts)


def outputs() -> dict[Path, str]:
    return {OUT_DIR / f"wgmma_{t[0]}.cuh": render(t[0]) for t in TYPES}


def main() -> int:
    for path, text in outputs().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
