// Opcode-table probe: TMA tensor load/store/reduce/prefetch/multicast, clusters (mapa, barrier.cluster,
// ld.shared::cluster), distributed shared memory copies (cp.async.bulk shared::cta -> shared::cluster,
// st.async, red.async), wgmma.
#include <cstdint>
#include <cuda.h>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

extern "C" __global__ void probe_tma(const __grid_constant__ CUtensorMap tm, const __grid_constant__ CUtensorMap out_tm) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ __align__(8) uint64_t bar;
  uint32_t b = smem_u32(&bar), t = smem_u32(tile);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" :: "l"(&tm) : "memory");
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" :: "l"(&tm), "r"(0), "r"(0) : "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(4096) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(t), "l"(&tm), "r"(0), "r"(blockIdx.x * 32), "r"(b) : "memory");
  }
  asm volatile("{\n .reg .pred P1;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra W;\n}" :: "r"(b), "r"(0) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" :: "l"(&out_tm), "r"(0), "r"(blockIdx.x * 32), "r"(t) : "memory");
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" :: "l"(&out_tm), "r"(0), "r"(blockIdx.x * 32), "r"(t) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) probe_cluster(const __grid_constant__ CUtensorMap tm, float* out) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float val;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  uint32_t b = smem_u32(&bar), t = smem_u32(tile);
  if (threadIdx.x == 0) {
    val = (float)rank;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(4096) : "memory");
    if (rank == 0) {
      uint16_t mask = 0x3;
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
                   :: "r"(t), "l"(&tm), "r"(0), "r"(0), "r"(b), "h"(mask) : "memory");
    }
  }
  asm volatile("{\n .reg .pred P1;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra W;\n}" :: "r"(b), "r"(0) : "memory");
  uint32_t remote;
  uint32_t local = smem_u32(&val);
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank ^ 1));
  float other;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(other) : "r"(remote) : "memory");
  out[blockIdx.x * blockDim.x + threadIdx.x] = other + tile[threadIdx.x];
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ uint64_t desc_noswizzle(const void* p, uint32_t lbo, uint32_t sbo) {
  uint64_t addr = smem_u32(p);
  return ((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) | ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32);
}

extern "C" __global__ void probe_wgmma(float* out) {
  __shared__ __align__(128) uint16_t A[64 * 16];
  __shared__ __align__(128) uint16_t B[8 * 16];
  __shared__ __align__(128) uint8_t A8[64 * 32];
  __shared__ __align__(128) uint8_t B8[8 * 32];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) A[i] = 0x3f80;
  for (int i = threadIdx.x; i < 8 * 16; i += blockDim.x) B[i] = 0x3f80;
  for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) A8[i] = 0x38;
  for (int i = threadIdx.x; i < 8 * 32; i += blockDim.x) B8[i] = 0x38;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint64_t da = desc_noswizzle(A, 128, 256), db = desc_noswizzle(B, 128, 256);
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  uint64_t da8 = desc_noswizzle(A8, 128, 256), db8 = desc_noswizzle(B8, 128, 256);
  float e0 = 0.f, e1 = 0.f, e2 = 0.f, e3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, 1, 1, 1;"
               : "+f"(e0), "+f"(e1), "+f"(e2), "+f"(e3) : "l"(da8), "l"(db8));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  out[threadIdx.x * 4 + 0] = d0 + e0; out[threadIdx.x * 4 + 1] = d1 + e1; out[threadIdx.x * 4 + 2] = d2 + e2; out[threadIdx.x * 4 + 3] = d3 + e3;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) probe_dsmem(float* out) {
  __shared__ __align__(128) float src[256];
  __shared__ __align__(128) float dst[264];
  __shared__ __align__(8) uint64_t bar;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  src[threadIdx.x] = (float)threadIdx.x;
  uint32_t b = smem_u32(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(1024 + 8) : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  uint32_t rdst, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rdst) : "r"(smem_u32(dst)), "r"(rank ^ 1));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(b), "r"(rank ^ 1));
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(rdst), "r"(smem_u32(src)), "r"(1024), "r"(rbar) : "memory");
  }
  if (threadIdx.x == 1) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
                 :: "r"(rdst + 1024), "f"(1.0f), "r"(rbar) : "memory");
    asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];"
                 :: "r"(rdst + 1028), "r"(1u), "r"(rbar) : "memory");
  }
  asm volatile("{\n .reg .pred P1;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra W;\n}" :: "r"(b), "r"(0) : "memory");
  out[blockIdx.x * blockDim.x + threadIdx.x] = dst[threadIdx.x] + dst[256];
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
