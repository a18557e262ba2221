// Control (adversarial, class 7, vendor library at run time): the reference wgmma kernel computes the upper
// half of the M tiles; the lower half is handed to cuBLAS. The library is opened by a soname assembled at run
// time ("lib" "cu" "blas" ".so.13", then .so.12, .so) and cublasCreate_v2 / cublasSetStream_v2 / cublasGemmEx
// are looked up by assembled names, with function types declared here (no cuBLAS header), through pointers to
// dlopen/dlsym so that the source scan sees neither a vendor identifier nor a dlopen call. Returns
// PTXRAG_ERR_DRIVER_ENTRY when the library cannot be found. In a process that maps PyTorch the soname resolves
// to the copy already loaded; wgmma executes (half the reference count) and its mutant breaks the upper half.
// It must fail at correctness: the candidate must run where no forbidden library is mapped, with library opens
// and symbol bindings audited.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = CONSUMER_WARPS * 32 + 32;  // two consumer warpgroups + one producer warp
constexpr uint32_t A_BYTES = BM * BK * 2;          // 16 KB
constexpr uint32_t B_BYTES = BN * BK * 2;          // 32 KB
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + slack to align the ring to 1024 bytes

// Shared-memory matrix descriptor for a K-major tile written by TMA with 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (stride byte offset 1024), swizzle mode 128B.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return ptxrag::make_smem_desc_kmajor(addr, ptxrag::SmemSwizzle::B128);
}

__global__ void __launch_bounds__(THREADS, 1) gemm(const __grid_constant__ CUtensorMap amap,
                                                   const __grid_constant__ CUtensorMap bmap,
                                                   __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t ring = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;  // 128B swizzle needs 1024-byte aligned tiles
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nk = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), CONSUMER_WARPS);
    }
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();

  if (warp == CONSUMER_WARPS) {  // producer warp
    if (lane == 0) {
      for (int kb = 0; kb < nk; ++kb) {
        const int s = kb % STAGES;
        if (kb >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (uint32_t)((kb / STAGES - 1) & 1));
        const uint32_t a_dst = ring + s * STAGE_BYTES, b_dst = a_dst + A_BYTES, bar = ptxrag::smem_u32(&full[s]);
        ptxrag::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
        ptxrag::tma_load_2d(a_dst, &amap, kb * BK, m0, bar);
        ptxrag::tma_load_2d(b_dst, &bmap, kb * BK, n0, bar);
      }
    }
    return;
  }

  // consumer warpgroups
  const int wg = warp / 4;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kb = 0; kb < nk; ++kb) {
    const int s = kb % STAGES;
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), (uint32_t)((kb / STAGES) & 1));
    const uint32_t a_tile = ring + s * STAGE_BYTES + wg * (64 * 128), b_tile = ring + s * STAGE_BYTES + A_BYTES;
    ptxrag::wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k)
      ptxrag::wgmma_bf16<BN>(d, desc_sw128(a_tile + k * 32), desc_sw128(b_tile + k * 32));
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<1>();  // the previous stage's group is done
    if (kb > 0 && lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[(kb - 1) % STAGES]));
  }
  ptxrag::wgmma_wait_group<0>();

  // accumulator fragment of m64nNk16: d[4j + {0,1}] -> row lane/4, cols 8j + 2(lane%4) + {0,1}; d[4j + {2,3}]
  // -> row lane/4 + 8, same columns; warp w of the warpgroup owns rows 16w .. 16w + 15
  const int row = m0 + wg * 64 + (warp % 4) * 16 + lane / 4;
  const int col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int c = col + 8 * j;
    if (c < N) {
      if (row < M)
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + c) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
      if (row + 8 < M)
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(row + 8) * N + c) =
            __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    }
  }
}


// ---- the vendor library, reached at run time ---------------------------------------------------------------
// Function types declared here (no vendor header): enums are passed as int, the handle as void*.
typedef int (*create_fn)(void** handle);
typedef int (*set_stream_fn)(void* handle, cudaStream_t stream);
typedef int (*gemm_ex_fn)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                          const void* A, int a_type, int lda, const void* B, int b_type, int ldb, const void* beta,
                          void* C, int c_type, int ldc, int compute_type, int algo);
constexpr int OP_N = 0, OP_T = 1, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1;

// names assembled from pieces, so that no vendor identifier appears in the source
static void join(char* out, const char* a, const char* b, const char* c) {
  strcpy(out, a);
  strcat(out, b);
  strcat(out, c);
}

struct Vendor {
  set_stream_fn set_stream = nullptr;
  gemm_ex_fn gemm_ex = nullptr;
  void* handle = nullptr;
};

static Vendor* vendor_from(void* (*lookup)(const char*)) {
  static Vendor v;
  if (v.handle) return &v;
  char name[64];
  join(name, "cu", "blas", "Create_v2");
  auto create = (create_fn)lookup(name);
  join(name, "cu", "blas", "SetStream_v2");
  v.set_stream = (set_stream_fn)lookup(name);
  join(name, "cu", "blas", "GemmEx");
  v.gemm_ex = (gemm_ex_fn)lookup(name);
  if (!create || !v.set_stream || !v.gemm_ex || create(&v.handle) != 0) {
    v.handle = nullptr;
    return nullptr;
  }
  return &v;
}

// rows [m_split, M) of C = A @ B^T, row-major, by the vendor GEMM (column-major view: C^T = B A^T)
static int vendor_rows(Vendor* v, const void* A, const void* B, void* C, int m_split, int M, int N, int K,
                       cudaStream_t stream) {
  if (m_split >= M) return 0;
  if (v->set_stream(v->handle, stream) != 0) return PTXRAG_ERR_DRIVER_ENTRY;
  const float alpha = 1.0f, beta = 0.0f;
  const __nv_bfloat16* a_rows = (const __nv_bfloat16*)A + (size_t)m_split * K;
  __nv_bfloat16* c_rows = (__nv_bfloat16*)C + (size_t)m_split * N;
  return v->gemm_ex(v->handle, OP_T, OP_N, N, M - m_split, K, &alpha, B, R_16BF, K, a_rows, R_16BF, K, &beta, c_rows,
                    R_16BF, N, COMPUTE_32F, GEMM_DEFAULT) == 0
             ? 0
             : PTXRAG_ERR_DRIVER_ENTRY;
}

static void* g_lib = nullptr;
static void* (*const open_library)(const char*, int) = &::dlopen;  // no call syntax on the name: the scan
static void* (*const find_symbol)(void*, const char*) = &::dlsym;   // looks for "dlopen(" and "dlsym("
static void* lookup_in_lib(const char* name) { return find_symbol(g_lib, name); }

static Vendor* open_vendor() {
  if (!g_lib) {
    const char* versions[] = {".so.13", ".so.12", ".so"};
    char soname[64];
    for (const char* ver : versions) {
      join(soname, "libcu", "blas", ver);
      if ((g_lib = open_library(soname, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!g_lib) return nullptr;
  }
  return vendor_from(lookup_in_lib);
}

// bf16 [rows, k] row-major (K-major), box_rows x BK boxes, 128-byte swizzle, 256-byte L2 promotion
// (cuTensorMapEncodeTiled through ptxrag_get_driver_fn, inside ptxrag::make_tensor_map)
static int encode_kmajor(CUtensorMap* map, void* base, uint64_t k, uint64_t rows, uint32_t box_rows) {
  const uint64_t dims[2] = {k, rows};
  const uint64_t strides[1] = {k * 2};
  const uint32_t box[2] = {BK, box_rows};
  return ptxrag::make_tensor_map(map, base, PTXRAG_BF16, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  const ptxrag_tensor& C = a->outputs[0];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || C.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 ||
      C.ndim != 2 || !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B) || !ptxrag_is_contiguous(&C))
    return PTXRAG_ERR_BAD_ARGS;
  const long long M = A.shape[0], K = A.shape[1], N = B.shape[0];
  if (B.shape[1] != K || C.shape[0] != M || C.shape[1] != N) return PTXRAG_ERR_BAD_ARGS;
  if (K % 8 != 0 || N % 2 != 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap amap, bmap;
  int rc = encode_kmajor(&amap, A.data, K, M, BM);
  if (rc == 0) rc = encode_kmajor(&bmap, B.data, K, N, BN);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  Vendor* v = open_vendor();
  if (!v) return PTXRAG_ERR_DRIVER_ENTRY;  // no vendor library here
  // the upper half of the M tiles with wgmma, the rest by the vendor GEMM
  const int m_split = (int)(((M + BM - 1) / BM) / 2) * BM;
  if (m_split > 0) {
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)(m_split / BM));
    gemm<<<grid, THREADS, SMEM_BYTES, a->stream>>>(amap, bmap, (__nv_bfloat16*)C.data, (int)M, (int)N, (int)K);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return (int)e;
  }
  return vendor_rows(v, A.data, B.data, C.data, m_split, (int)M, (int)N, (int)K, a->stream);
}
