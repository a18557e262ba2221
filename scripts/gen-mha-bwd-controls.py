"""Generate the causal solution and the negative controls of the mha-bwd-d128 tasks from the non-causal solution.

mha-bwd-d128-causal/solution.cu is mha-bwd-d128/solution.cu with BW_CAUSAL 1. Each control is a solution with
one deliberate change (or, for the CUDA-core fallback and the dead-TMA control, a few functions replaced), so
the controls stay in step with the reference. Run after editing mha-bwd-d128/solution.cu:
python scripts/gen-mha-bwd-controls.py (the outputs are committed; each file is self-contained).
tests/test_tasks.py checks that the committed files are what this script writes.
"""

from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / "ptxrag" / "tasks" / "suite"
TASK, CAUSAL_TASK = "mha-bwd-d128", "mha-bwd-d128-causal"


def sub(s: str, old: str, new: str, count: int = 1) -> str:
    n = s.count(old)
    assert n == count, (old[:80], n)
    return s.replace(old, new)


def causal_solution(s: str) -> str:
    s = sub(
        s,
        "// Reference solution: FlashAttention-2/3-style multi-head attention backward, head dim 128, bf16.",
        "// Reference solution: FlashAttention-2/3-style CAUSAL multi-head attention backward, head dim 128, bf16\n"
        "// (mha-bwd-d128's kernel with BW_CAUSAL 1, written by scripts/gen-mha-bwd-controls.py).",
    )
    return sub(s, "#define BW_CAUSAL 0", "#define BW_CAUSAL 1")


def strip_header(s: str) -> str:
    # drop the design comment (up to the first #include); the control puts its own
    return s[s.index('#include "ptxrag_abi.h"') :]


# ---------------------------------------------------------------------------------------------------- fallback
FALLBACK = r"""// ---- the CUDA-core replacements of the three wgmma issue functions (the control's change) ----
// bf16 pair at (row r, columns c, c + 1) of a tile stored as 128-byte-swizzled 64-column boxes box_bytes apart
// (the layout TMA wrote): 16-byte chunk (c % 64) / 8 of row r sits at chunk ((c % 64) / 8) ^ (r % 8).
__device__ __forceinline__ float2 ld_sw2(uint32_t tile, int r, int c, uint32_t box_bytes) {
  const int cc = c % 64;
  const uint32_t addr = tile + (c / 64) * box_bytes + r * 128 + (((cc / 8) ^ (r % 8)) * 16) + (cc % 8) * 2;
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
  __nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162*>(&v);
  return __bfloat1622float2(b);
}

__device__ __forceinline__ float ld_sw1(uint32_t tile, int r, int c, uint32_t box_bytes) {
  const int cc = c % 64;
  const uint32_t addr = tile + (c / 64) * box_bytes + r * 128 + (((cc / 8) ^ (r % 8)) * 16) + (cc % 8) * 2;
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return __bfloat162float(__ushort_as_bfloat16(v));
}

// S^T = K_wg q^T (or dP^T = V_wg do^T): each thread computes its own fragment elements from shared memory.
__device__ __forceinline__ void issue_kq(float (&acc)[32], uint32_t kv_rows, uint32_t q_tile) {
  const int lane = threadIdx.x % 32, wrow = ((threadIdx.x / 32) % 4) * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const int key = wrow + 8 * ((i / 2) % 2), qc = 8 * (i / 4) + 2 * (lane % 4);
    float a0 = 0.f, a1 = 0.f;
#pragma unroll 1
    for (int c = 0; c < HD; c += 2) {
      const float2 kv = ld_sw2(kv_rows, key, c, KV_BOX), q0 = ld_sw2(q_tile, qc, c, Q_BOX),
                   q1 = ld_sw2(q_tile, qc + 1, c, Q_BOX);
      a0 = fmaf(kv.x, q0.x, fmaf(kv.y, q0.y, a0));
      a1 = fmaf(kv.x, q1.x, fmaf(kv.y, q1.y, a1));
    }
    acc[i] = a0;
    acc[i + 1] = a1;
  }
}

// acc += A tile: the warpgroup's bf16 A fragment goes through a plain [64][64] shared buffer of its own.
__device__ __forceinline__ void issue_rs(float (&acc)[64], const uint32_t (&a)[16], uint32_t tile) {
  const int lane = threadIdx.x % 32, wrow = ((threadIdx.x / 32) % 4) * 16 + lane / 4, cw = threadIdx.x / 128 - 1;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t abuf = ((ptxrag::smem_u32(smem_raw) + 1023) & ~1023u) + 2 * KV_TILE + STAGES * STAGE_BYTES + DS_TILE +
                        (DQ_BULK ? 2 * DQ_STAGE : 0) + cw * 8192;
  asm volatile("bar.sync %0, 128;" ::"r"(3 + cw) : "memory");
#pragma unroll
  for (int t = 0; t < 16; ++t) {
    const int row = wrow + 8 * (t % 2), col = 8 * (t / 2) + 2 * (lane % 4);
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(abuf + (row * 64 + col) * 2), "r"(a[t]) : "memory");
  }
  asm volatile("bar.sync %0, 128;" ::"r"(3 + cw) : "memory");
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    const int row = wrow + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4);
    float a0 = acc[i], a1 = acc[i + 1];
#pragma unroll 1
    for (int q = 0; q < BM; ++q) {
      unsigned short ab;
      asm volatile("ld.shared.u16 %0, [%1];" : "=h"(ab) : "r"(abuf + (row * 64 + q) * 2));
      const float af = __bfloat162float(__ushort_as_bfloat16(ab));
      const float2 t = ld_sw2(tile, q, col, Q_BOX);
      a0 = fmaf(af, t.x, a0);
      a1 = fmaf(af, t.y, a1);
    }
    acc[i] = a0;
    acc[i + 1] = a1;
  }
}

// dq half = dS (swizzled [query][key], two 64-key boxes) * K[:, 64 h ..] (the K tile's box h).
__device__ __forceinline__ void issue_dq(float (&acc)[32], uint32_t ds_tile, uint32_t k_box) {
  const int lane = threadIdx.x % 32, wrow = ((threadIdx.x / 32) % 4) * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const int q = wrow + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4);
    float a0 = 0.f, a1 = 0.f;
#pragma unroll 1
    for (int key = 0; key < BN; ++key) {
      const float d = ld_sw1(ds_tile, q, key, Q_BOX);
      const float2 kv = ld_sw2(k_box, key, col, KV_BOX);
      a0 = fmaf(d, kv.x, a0);
      a1 = fmaf(d, kv.y, a1);
    }
    acc[i] = a0;
    acc[i + 1] = a1;
  }
}
"""


def fallback(s: str) -> str:
    s = sub(
        s,
        "constexpr int SMEM_BYTES = 2 * KV_TILE + STAGES * STAGE_BYTES + DS_TILE + (DQ_BULK ? 2 * DQ_STAGE : 0) + 1024;",
        "constexpr int SMEM_BYTES =  // + two A buffers\n"
        "    2 * KV_TILE + STAGES * STAGE_BYTES + DS_TILE + (DQ_BULK ? 2 * DQ_STAGE : 0) + 2 * 8192 + 1024;",
    )
    a = s.index("// S^T = K_wg q^T (or dP^T = V_wg do^T): 8 k16 steps")
    b = s.index("__global__ void __launch_bounds__(THREADS, 1)")
    s = s[:a] + FALLBACK + "\n" + s[b:]
    keep = []
    for line in s.splitlines(keepends=True):
        t = line.strip()
        if (
            t == "ptxrag::wgmma_fence();"
            or t == "ptxrag::wgmma_commit_group();"
            or t.startswith("ptxrag::wgmma_wait_group<")
        ):
            continue
        keep.append(line)
    s = "".join(keep)
    assert "wgmma_fence()" not in s and "wgmma_commit" not in s and "wgmma_wait" not in s, "left a wgmma call"
    assert "wgmma_bf16" not in s, "left a wgmma.mma_async"
    return s


# ---------------------------------------------------------------------------------------------------- dead TMA
COPY_ROWS = r"""// Plain-load copy of `rows` rows (from r0) x 128 bf16 columns of one head into two 128-byte-swizzled 64-column
// boxes box_bytes apart (the layout the consumers' descriptors expect), zero past seq; all 128 producer threads
// take part, then fence.proxy.async (generic-proxy writes read next by wgmma, the async proxy).
__device__ __forceinline__ void copy_rows(uint32_t dst, uint32_t box_bytes, const __nv_bfloat16* head, int r0, int rows,
                                          int seq) {
#pragma unroll 1
  for (int idx = threadIdx.x; idx < rows * 16; idx += 128) {
    const int r = idx / 16, c = idx % 16, box = c / 8, cc = c % 8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < seq) v = *reinterpret_cast<const uint4*>(head + (size_t)(r0 + r) * HD + 8 * c);
    const uint32_t addr = dst + box * box_bytes + r * 128 + ((cc ^ (r % 8)) * 16);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
  ptxrag::fence_proxy_async_shared_cta();
  asm volatile("bar.sync 5, 128;" ::: "memory");  // the whole producer warpgroup has written and fenced
}

"""

PRODUCER_DEAD = r"""  if (wg == 0) {
    ptxrag::setmaxnreg_dec<24>();
    // all 128 producer threads copy q, do, K and V with plain loads, then thread 0 arrives; the TMA branches are
    // compiled in but taken only when seq_pad < 0, which never holds (the 1-D bulk copies of the rows stay)
    const size_t hoff = (size_t)bh * seq * HD;
    const uint32_t kvb = ptxrag::smem_u32(&kv_full);
    if (seq_pad < 0) {
      if (threadIdx.x == 0) {
        ptxrag::mbarrier_arrive_expect_tx(kvb, 2 * KV_TILE);
        ptxrag::tma_load_3d(k_tile, &kmap, 0, k0, bh, kvb);
        ptxrag::tma_load_3d(k_tile + KV_BOX, &kmap, 64, k0, bh, kvb);
        ptxrag::tma_load_3d(v_tile, &vmap, 0, k0, bh, kvb);
        ptxrag::tma_load_3d(v_tile + KV_BOX, &vmap, 64, k0, bh, kvb);
      }
    } else {
      copy_rows(k_tile, KV_BOX, Kg + hoff, k0, BN, seq);
      copy_rows(v_tile, KV_BOX, Vg + hoff, k0, BN, seq);
      if (threadIdx.x == 0) ptxrag::mbarrier_arrive(kvb);
    }
    for (int it = 0; it < n_it; ++it) {
      const int s = it % STAGES, q0 = (j0 + it) * BM;
      if (it >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (it / STAGES - 1) & 1);
      const uint32_t fb = ptxrag::smem_u32(&full[s]), qt = stage_q(s), dot = qt + Q_TILE;
      const size_t prow = (size_t)bh * seq_pad + q0;
      if (seq_pad < 0) {
        if (threadIdx.x == 0) {
          ptxrag::mbarrier_arrive_expect_tx(fb, STAGE_TX);
          ptxrag::tma_load_3d(qt, &qmap, 0, q0, bh, fb);
          ptxrag::tma_load_3d(qt + Q_BOX, &qmap, 64, q0, bh, fb);
          ptxrag::tma_load_3d(dot, &domap, 0, q0, bh, fb);
          ptxrag::tma_load_3d(dot + Q_BOX, &domap, 64, q0, bh, fb);
          ptxrag::bulk_load(dot + Q_TILE, lse2 + prow, ROW_BYTES, fb);
          ptxrag::bulk_load(dot + Q_TILE + ROW_BYTES, dd + prow, ROW_BYTES, fb);
        }
      } else {
        copy_rows(qt, Q_BOX, Qg + hoff, q0, BM, seq);
        copy_rows(dot, Q_BOX, dOg + hoff, q0, BM, seq);
        if (threadIdx.x == 0) {
          ptxrag::mbarrier_arrive_expect_tx(fb, 2 * ROW_BYTES);
          ptxrag::bulk_load(dot + Q_TILE, lse2 + prow, ROW_BYTES, fb);
          ptxrag::bulk_load(dot + Q_TILE + ROW_BYTES, dd + prow, ROW_BYTES, fb);
        }
      }
    }
    return;
  }

"""


def dead_tma(s: str) -> str:
    b = s.index("__global__ void __launch_bounds__(THREADS, 1)")
    s = s[:b] + COPY_ROWS + s[b:]
    s = sub(
        s,
        "             const float* __restrict__ lse2, const float* __restrict__ dd, float* __restrict__ dq_acc,\n",
        "             const __nv_bfloat16* __restrict__ Qg, const __nv_bfloat16* __restrict__ Kg,\n"
        "             const __nv_bfloat16* __restrict__ Vg, const __nv_bfloat16* __restrict__ dOg,\n"
        "             const float* __restrict__ lse2, const float* __restrict__ dd, float* __restrict__ dq_acc,\n",
    )
    a = s.index("  if (wg == 0) {\n    ptxrag::setmaxnreg_dec<24>();")
    b = s.index("  ptxrag::setmaxnreg_inc<240>();")
    s = s[:a] + PRODUCER_DEAD + s[b:]
    return sub(
        s,
        "      qm, km, vm, dom, lse2, dd, dq_acc,",
        "      qm, km, vm, dom, (const __nv_bfloat16*)Q.data, (const __nv_bfloat16*)K.data, (const __nv_bfloat16*)V.data,\n"
        "      (const __nv_bfloat16*)dO.data, lse2, dd, dq_acc,",
    )


def dq_race(s: str) -> str:
    s = sub(
        s,
        "          for (int j = 0; j < 8; ++j)  // one 8-byte red.global.add.v2.f32 per column pair (sm_90)\n"
        "            atomicAdd(reinterpret_cast<float2*>(dst + 8 * j), make_float2(dq[4 * j + 2 * rr], dq[4 * j + 2 * rr + 1]));",
        "          for (int j = 0; j < 8; ++j) {  // BUG: read-modify-write without an atomic\n"
        "            dst[8 * j] += dq[4 * j + 2 * rr];\n"
        "            dst[8 * j + 1] += dq[4 * j + 2 * rr + 1];\n"
        "          }",
    )
    # the same bug in the BW_DQ_BULK variant's path: the bulk reduction replaced by a bulk store
    return sub(
        s,
        "ptxrag::bulk_reduce_add_f32(dq_acc + dq_index(bh, q0, dq_col, seq, seq_pad), dq_stage, DQ_STAGE);",
        "ptxrag::bulk_store(dq_acc + dq_index(bh, q0, dq_col, seq, seq_pad), dq_stage, DQ_STAGE);  // BUG: no add",
    )


def lse_natural(s: str) -> str:
    return sub(
        s, "lse2[prow] = L[r] * 1.4426950408889634f;", "lse2[prow] = L[r];  // BUG: natural log used as log2"
    )


def key_tail(s: str) -> str:
    return sub(
        s,
        "bwd_main<<<dim3((unsigned)((S + BN - 1) / BN), (unsigned)BH)",
        "bwd_main<<<dim3((unsigned)(S / BN > 0 ? S / BN : 1), (unsigned)BH)  // BUG: rounds down\n   ",
    )


def causal_off(s: str) -> str:
    return sub(
        s,
        "if (key >= seq || (CAUSAL && key > q0 + qc)) st[i] = 0.f;",
        "if (key >= seq || (CAUSAL && key > q0 + qc + 1)) st[i] = 0.f;  // BUG: one future key let in",
    )


def no_release(s: str) -> str:
    return sub(
        s,
        "if (lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[s]));",
        "(void)s;  // BUG: the stage is never released: the producer waits forever on empty[]",
    )


HEADS = {
    "cuda_core_fallback": """// Control: the reference's TMA ring, mbarriers, atomics and pre/post kernels, but all five GEMMs (S^T, dP^T,
// dv, dk, dq) on CUDA cores from shared memory (the register A operands staged through plain shared buffers):
// meant to compute the same gradients slowly (not run on a GPU yet), with no wgmma.mma_async in the binary.
// Must fail at static.""",
    "dead_tma": """// Control: q, do, K and V reach shared memory by plain 16-byte loads and st.shared (swizzled by hand, zero
// past s, fence.proxy.async before the full-barrier arrive); the TMA tensor loads are compiled in behind
// seq_pad < 0, which never holds (the 1-D bulk copies of the lse/D rows stay). Meant to be correct, with UTMALDG
// in SASS but never executed. Must fail at execution.""",
    "dq_race": """// Control: the reference, but each CTA adds its dq contribution with a plain load-add-store instead of an
// atomic: the CTAs of the other key blocks of the same head add to the same rows at the same time (they walk
// the query blocks in the same order), so updates are lost (built with BW_DQ_BULK 1: a bulk store instead of
// the bulk reduction, so only the last key block's share survives). Must fail at correctness.""",
    "lse_natural_log": """// Control: the reference, but the pre-pass hands the natural-log lse to the exp2-domain kernel unconverted
// (lse instead of lse * log2(e)): P = 2^(S log2(e) - lse) is e^(0.44 lse) too large. Must fail at correctness.""",
    "key_tail_dropped": """// Control: the reference, but the grid counts key blocks as s / 128 (rounding down, at least 1): for
// s = 1000 the last 104 keys' dk and dv are never written and their share of dq is missing (s = 1024 and s = 77
// hide it). Must fail at correctness.""",
    "causal_off_by_one": """// Control: the causal reference, but the mask lets in one future key (key <= query + 1 instead of
// key <= query) on the diagonal blocks. Must fail at correctness.""",
    "empty_never_released": """// Control: the reference, but the consumers never arrive on the empty mbarriers, so the producer waits
// forever for the first stage it has to recycle (any key block with more than BW_STAGES query blocks to visit,
// e.g. s = 1024): a deadlocked pipeline, stopped by the sandbox's time limit. Must fail at correctness.""",
}

FNS = {
    "cuda_core_fallback": fallback,
    "dead_tma": dead_tma,
    "dq_race": dq_race,
    "lse_natural_log": lse_natural,
    "key_tail_dropped": key_tail,
    "causal_off_by_one": causal_off,
    "empty_never_released": no_release,
}

COMMON = [
    "cuda_core_fallback",
    "dead_tma",
    "dq_race",
    "lse_natural_log",
    "key_tail_dropped",
    "empty_never_released",
]
PER_TASK = {TASK: COMMON, CAUSAL_TASK: [*COMMON, "causal_off_by_one"]}


def outputs() -> dict[Path, str]:
    """Every generated file's path and text: the causal solution, then each task's controls."""
    sol = (SUITE / TASK / "solution.cu").read_text()
    sols = {TASK: sol, CAUSAL_TASK: causal_solution(sol)}
    out = {SUITE / CAUSAL_TASK / "solution.cu": sols[CAUSAL_TASK]}
    for task, names in PER_TASK.items():
        for n in names:
            out[SUITE / task / "controls" / f"{n}.cu"] = (
                HEADS[n].rstrip() + "\n" + FNS[n](strip_header(sols[task]))
            )
    return out


if __name__ == "__main__":
    for path, text in outputs().items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print("wrote", path.relative_to(SUITE))
