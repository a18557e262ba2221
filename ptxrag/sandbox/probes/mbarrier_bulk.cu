// Opcode-table probe: mbarrier, fences, 1-D bulk copies and bulk reduction, griddepcontrol, setmaxnreg.
#include <cstdint>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

extern "C" __global__ void probe_bulk(const float* src, float* dst, float* acc, int n) {
  extern __shared__ __align__(128) float buf[];
  __shared__ __align__(8) uint64_t bar;
  uint32_t b = smem_u32(&bar), s = smem_u32(buf);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(n * 4) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(s), "l"(src), "r"(n * 4), "r"(b) : "memory");
  }
  asm volatile("{\n .reg .pred P1;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra W;\n}" :: "r"(b), "r"(0) : "memory");
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] *= 2.f;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(s), "r"(n * 4) : "memory");
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" :: "l"(acc), "r"(s), "r"(n * 4) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

extern "C" __global__ void probe_mbarrier_arrive(int* out) {
  __shared__ __align__(8) uint64_t bar;
  uint32_t b = smem_u32(&bar);
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(blockDim.x));
  __syncthreads();
  uint64_t token;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(token) : "r"(b) : "memory");
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(b), "l"(token) : "memory");
  }
  out[threadIdx.x] = 1;
}

extern "C" __global__ void probe_griddep(const float* x, float* y) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  y[threadIdx.x] = x[threadIdx.x] + 1.f;
  asm volatile("griddepcontrol.launch_dependents;");
}

extern "C" __global__ void __launch_bounds__(256, 1) probe_setmaxnreg(float* y) {
  int wg = threadIdx.x / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    y[threadIdx.x] = 1.f;
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    y[threadIdx.x] = 2.f;
  }
}
