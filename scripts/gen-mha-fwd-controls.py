"""Generate the negative controls of the mha-fwd-lse-d128 tasks from each task's solution.cu.

Each control is the reference with one deliberate change (or, for the CUDA-core fallback and the dead-TMA
control, a few functions replaced), so the controls stay in step with the reference. Run after editing a
solution: python scripts/gen-mha-fwd-controls.py (the outputs are committed; the controls are self-contained).
"""

from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / "ptxrag" / "tasks" / "suite"


def sub(s, old, new, count=1):
    n = s.count(old)
    assert n == count, (old[:80], n)
    return s.replace(old, new)


def strip_header(s):
    # drop the design comment (up to the first #include) and put the control's own
    i = s.index('#include "ptxrag_abi.h"')
    return s[i:]


def control(sol, head, body_fn):
    return head.rstrip() + "\n" + body_fn(strip_header(sol))


# ---------------------------------------------------------------------------------------------------- fallback
SW_HELPERS = r"""
// bf16 pair at (row r, columns c, c+1) of a 128-column tile stored as two 128-byte-swizzled 64-column boxes
// (the layout TMA wrote): 16-byte chunk (c % 64) / 8 of row r sits at chunk ((c % 64) / 8) ^ (r % 8).
__device__ __forceinline__ float2 ld_sw2(uint32_t tile, int r, int c) {
  const int cc = c % 64;
  const uint32_t addr = tile + (c / 64) * BOX_BYTES + r * 128 + (((cc / 8) ^ (r % 8)) * 16) + (cc % 8) * 2;
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
  __nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162*>(&v);
  return __bfloat1622float2(b);
}
"""

QK_FALLBACK = r"""// S = Q K^T on CUDA cores (the fallback): each thread computes its own fragment elements from shared memory.
__device__ __forceinline__ void issue_qk(float (&s)[64], uint32_t q_tile, uint32_t k_tile) {
  const int lane = threadIdx.x % 32, wrow = ((threadIdx.x / 32) % 4) * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    const int row = wrow + 8 * ((i / 2) % 2), key = 8 * (i / 4) + 2 * (lane % 4);
    float a0 = 0.f, a1 = 0.f;
#pragma unroll 1
    for (int c = 0; c < HD; c += 2) {
      const float2 q = ld_sw2(q_tile, row, c), k0 = ld_sw2(k_tile, key, c), k1 = ld_sw2(k_tile, key + 1, c);
      a0 = fmaf(q.x, k0.x, fmaf(q.y, k0.y, a0));
      a1 = fmaf(q.x, k1.x, fmaf(q.y, k1.y, a1));
    }
    s[i] = a0;
    s[i + 1] = a1;
  }
}
"""

PV_FALLBACK = r"""// O += P V on CUDA cores: the warpgroup's bf16 P goes through a plain [64][128] shared buffer.
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[32], uint32_t v_tile) {
  const int lane = threadIdx.x % 32, wrow = ((threadIdx.x / 32) % 4) * 16 + lane / 4, cw = threadIdx.x / 128 - 1;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t pbuf = ((ptxrag::smem_u32(smem_raw) + 1023) & ~1023u) + (1 + 2 * STAGES) * TILE_BYTES + cw * 64 * 256;
  asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
  for (int t = 0; t < 32; ++t) {
    const int row = wrow + 8 * (t % 2), key = 8 * (t / 2) + 2 * (lane % 4);
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(pbuf + (row * 128 + key) * 2), "r"(p[t]) : "memory");
  }
  asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    const int row = wrow + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4);
    float a0 = o[i], a1 = o[i + 1];
#pragma unroll 1
    for (int key = 0; key < BN; ++key) {
      unsigned short pb;
      asm volatile("ld.shared.u16 %0, [%1];" : "=h"(pb) : "r"(pbuf + (row * 128 + key) * 2));
      const float pf = __bfloat162float(__ushort_as_bfloat16(pb));
      const float2 v = ld_sw2(v_tile, key, col);
      a0 = fmaf(pf, v.x, a0);
      a1 = fmaf(pf, v.y, a1);
    }
    o[i] = a0;
    o[i + 1] = a1;
  }
}
"""


def fallback(s):
    s = sub(
        s,
        "constexpr int SMEM_BYTES = (1 + 2 * STAGES) * TILE_BYTES + 1024;",
        "constexpr int SMEM_BYTES = (1 + 2 * STAGES) * TILE_BYTES + 2 * 64 * 256 + 1024;  // + two P buffers",
    )
    # drop the register-A wgmma wrapper and the two wgmma issue functions
    b = s.index("__device__ __forceinline__ float ex2")
    s = s[:b] + SW_HELPERS.lstrip() + "\n" + s[b:]
    a = s.index("// S = Q K^T for this warpgroup's")
    b = s.index("// Mask scores of keys")
    s = s[:a] + QK_FALLBACK + "\n" + PV_FALLBACK + "\n" + s[b:]
    for call in (
        "ptxrag::wgmma_fence();",
        "ptxrag::wgmma_commit_group();",
        "ptxrag::wgmma_wait_group<0>();",
        "ptxrag::wgmma_wait_group<1>();  // S_j is ready; P V still in flight",
        "ptxrag::wgmma_wait_group<0>();  // P_{j-1} V_{j-1} done: its stage is free, o may be rescaled, p rewritten",
    ):
        s = s.replace("    " + call + "\n", "").replace("  " + call + "\n", "")
    assert "wgmma_fence()" not in s and "wgmma_commit" not in s and "wgmma_wait" not in s, "left a wgmma call"
    return s


# ---------------------------------------------------------------------------------------------------- dead TMA
COPY_TILE = r"""
// Plain-load copy of a 128-row x 128-column bf16 tile (rows r0.. of one head) into the two 128-byte-swizzled
// boxes the consumers' descriptors expect, zero past seq; all 128 producer threads take part.
__device__ __forceinline__ void copy_tile(uint32_t dst, const __nv_bfloat16* head, int r0, int seq) {
  const int t = threadIdx.x;
#pragma unroll 1
  for (int idx = t; idx < 128 * 16; idx += 128) {
    const int r = idx / 16, c = idx % 16, box = c / 8, cc = c % 8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < seq) v = *reinterpret_cast<const uint4*>(head + (size_t)(r0 + r) * HD + 8 * c);
    const uint32_t addr = dst + box * BOX_BYTES + r * 128 + ((cc ^ (r % 8)) * 16);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
  ptxrag::fence_proxy_async_shared_cta();  // generic-proxy writes, read next by wgmma (async proxy)
}
"""

PRODUCER_DEAD = r"""  if (wg == 0) {
    ptxrag::setmaxnreg_dec<24>();  // 24 x 128 + 240 x 256 = 64512 registers: the pool the consumers grow into
    // all 128 producer threads copy with plain loads and arrive (barrier counts 128); the TMA branch below
    // is compiled in but taken only when use_tma (passed as b*h < 0) holds, which it never does
    const size_t hoff = (size_t)bh * seq * HD;
    const uint32_t qb_bar = ptxrag::smem_u32(&q_full);
    if (use_tma) {
      if (threadIdx.x == 0) {
        ptxrag::mbarrier_arrive_expect_tx(qb_bar, TILE_BYTES);
        ptxrag::tma_load_3d(q_tile, &qmap, 0, qb * BM, bh, qb_bar);
        ptxrag::tma_load_3d(q_tile + BOX_BYTES, &qmap, 64, qb * BM, bh, qb_bar);
      } else {
        ptxrag::mbarrier_arrive(qb_bar);
      }
    } else {
      copy_tile(q_tile, Qg + hoff, qb * BM, seq);
      ptxrag::mbarrier_arrive(qb_bar);
    }
    for (int j = 0; j < nkv; ++j) {
      const int s = j % STAGES;
      if (j >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (j / STAGES - 1) & 1);
      const uint32_t k_tile = base + (1 + 2 * s) * TILE_BYTES, v_tile = k_tile + TILE_BYTES;
      const uint32_t kb = ptxrag::smem_u32(&k_full[s]), vb = ptxrag::smem_u32(&v_full[s]);
      if (use_tma) {
        if (threadIdx.x == 0) {
          ptxrag::mbarrier_arrive_expect_tx(kb, TILE_BYTES);
          ptxrag::tma_load_3d(k_tile, &kmap, 0, j * BN, bh, kb);
          ptxrag::tma_load_3d(k_tile + BOX_BYTES, &kmap, 64, j * BN, bh, kb);
          ptxrag::mbarrier_arrive_expect_tx(vb, TILE_BYTES);
          ptxrag::tma_load_3d(v_tile, &vmap, 0, j * BN, bh, vb);
          ptxrag::tma_load_3d(v_tile + BOX_BYTES, &vmap, 64, j * BN, bh, vb);
        } else {
          ptxrag::mbarrier_arrive(kb);
          ptxrag::mbarrier_arrive(vb);
        }
      } else {
        copy_tile(k_tile, Kg + hoff, j * BN, seq);
        ptxrag::mbarrier_arrive(kb);
        copy_tile(v_tile, Vg + hoff, j * BN, seq);
        ptxrag::mbarrier_arrive(vb);
      }
    }
    return;
  }
"""


def dead_tma(s):
    b = s.index("__device__ __forceinline__ float ex2")
    s = s[:b] + COPY_TILE.lstrip() + "\n" + s[b:]
    s = sub(
        s,
        "const __grid_constant__ CUtensorMap vmap, __nv_bfloat16* __restrict__ O, float* __restrict__ L, int seq,\n            float sl2) {",
        "const __grid_constant__ CUtensorMap vmap, const __nv_bfloat16* __restrict__ Qg,\n            const __nv_bfloat16* __restrict__ Kg, const __nv_bfloat16* __restrict__ Vg, __nv_bfloat16* __restrict__ O,\n            float* __restrict__ L, int seq, float sl2, int use_tma) {",
    )
    s = sub(
        s,
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&q_full), 1);",
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&q_full), 128);",
    )
    s = sub(
        s,
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&k_full[s]), 1);",
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&k_full[s]), 128);",
    )
    s = sub(
        s,
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&v_full[s]), 1);",
        "ptxrag::mbarrier_init(ptxrag::smem_u32(&v_full[s]), 128);",
    )
    a = s.index("  if (wg == 0) {\n    ptxrag::setmaxnreg_dec<24>();")
    b = s.index("  ptxrag::setmaxnreg_inc<240>();")
    s = s[:a] + PRODUCER_DEAD + "\n" + s[b:]
    s = sub(
        s,
        "(qm, km, vm, (__nv_bfloat16*)Ot.data, (float*)Lt.data, (int)S,\n                                                     sl2);",
        "(qm, km, vm, (const __nv_bfloat16*)Q.data, (const __nv_bfloat16*)K.data,\n                                                     (const __nv_bfloat16*)V.data, (__nv_bfloat16*)Ot.data,\n                                                     (float*)Lt.data, (int)S, sl2, (int)(B * H < 0));",
    )
    return s


def lse_base2(s):
    return sub(
        s,
        "L[head + row] = (m[r] + __log2f(l[r])) * 0.69314718055994531f;",
        "L[head + row] = m[r] + __log2f(l[r]);  // BUG: base 2",
    )


def q_tail(s):
    return sub(
        s,
        "const dim3 grid((unsigned)((S + BM - 1) / BM), (unsigned)(B * H));",
        "const dim3 grid((unsigned)(S / BM > 0 ? S / BM : 1), (unsigned)(B * H));  // BUG: rounds down",
    )


def key_tail(s):
    return sub(
        s,
        "if (key >= seq || (CAUSAL && key > row)) s[i] = -INFINITY;",
        "if (CAUSAL && key > row) s[i] = -INFINITY;  // BUG: keys past seq not masked",
    )


def causal_off(s):
    return sub(
        s,
        "if (key >= seq || (CAUSAL && key > row)) s[i] = -INFINITY;",
        "if (key >= seq || (CAUSAL && key > row + 1)) s[i] = -INFINITY;  // BUG: one future key let in",
    )


def no_release(s):
    return sub(
        s,
        "if (lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[j % STAGES]));",
        "(void)j;  // BUG: the stage is never released: the producer waits forever on empty[]",
    )


HEADS = {
    "cuda_core_fallback": """// Control: the reference's TMA ring, mbarriers and online softmax, but both GEMMs (Q K^T and P V) on CUDA
// cores from shared memory (P staged through a plain shared buffer): correct, slow, and no wgmma.mma_async in
// the binary. Must fail at static.""",
    "dead_tma": """// Control: Q, K and V reach shared memory by plain 16-byte loads and st.shared (swizzled by hand, zero past
// s, fence.proxy.async before the full-barrier arrive); the TMA loads are compiled in behind use_tma, passed as
// b*h < 0, which never holds. Correct, with UTMALDG in SASS but never executed. Must fail at execution.""",
    "lse_base2": """// Control: the reference, but lse is returned in base 2 (m + log2 l, the kernel's internal exp2 domain)
// instead of natural log: o is right, lse is 1.44x too large. Must fail at correctness.""",
    "q_tail_dropped": """// Control: the reference, but the grid counts query blocks as s / 128 (rounding down, at least 1): for
// s = 1000 the last 104 rows of o and lse are never written (s = 1024 hides it). Must fail at correctness.""",
    "key_tail_unmasked": """// Control: the reference, but keys past s are never masked: the TMA zero-filled key rows of the last block
// enter the softmax with score 0 (and v = 0), shrinking o and raising lse on every row when s % 128 != 0
// (s = 1000, 77; s = 1024 hides it). Must fail at correctness.""",
    "causal_off_by_one": """// Control: the reference, but the causal mask lets in one future key (key <= row + 1 instead of key <= row):
// every row but the last sees the next token. Must fail at correctness.""",
    "empty_never_released": """// Control: the reference, but the consumers never arrive on the empty mbarriers, so the producer waits
// forever for the first stage it has to recycle (any s above FA_STAGES * 128 keys): a deadlocked pipeline,
// stopped by the sandbox's time limit. Must fail at correctness.""",
}

FNS = {
    "cuda_core_fallback": fallback,
    "dead_tma": dead_tma,
    "lse_base2": lse_base2,
    "q_tail_dropped": q_tail,
    "key_tail_unmasked": key_tail,
    "causal_off_by_one": causal_off,
    "empty_never_released": no_release,
}

PER_TASK = {
    "mha-fwd-lse-d128": [
        "cuda_core_fallback",
        "dead_tma",
        "lse_base2",
        "q_tail_dropped",
        "key_tail_unmasked",
        "empty_never_released",
    ],
    "mha-fwd-lse-d128-causal": [
        "cuda_core_fallback",
        "dead_tma",
        "lse_base2",
        "q_tail_dropped",
        "causal_off_by_one",
        "empty_never_released",
    ],
}


def outputs() -> dict[Path, str]:
    """Every control file's path and text, generated from the current solutions."""
    out = {}
    for task, names in PER_TASK.items():
        sol = (SUITE / task / "solution.cu").read_text()
        for n in names:
            out[SUITE / task / "controls" / f"{n}.cu"] = control(sol, HEADS[n], FNS[n])
    return out


if __name__ == "__main__":
    for path, text in outputs().items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print("wrote", path.relative_to(SUITE))
