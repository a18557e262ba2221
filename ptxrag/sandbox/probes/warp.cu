// Opcode-table probe: warp-level instructions (redux.sync, elect.sync) and sm_80 cp.async + mma.sync.
#include <cstdint>
#include <cuda_bf16.h>

extern "C" __global__ void probe_redux(const int* in, int* out) {
  int v = in[threadIdx.x];
  int s, m;
  asm volatile("redux.sync.add.s32 %0, %1, 0xffffffff;" : "=r"(s) : "r"(v));
  asm volatile("redux.sync.max.s32 %0, %1, 0xffffffff;" : "=r"(m) : "r"(v));
  out[threadIdx.x] = s + m;
}

extern "C" __global__ void probe_elect(int* out) {
  uint32_t pred;
  asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(pred));
  if (pred) out[threadIdx.x / 32] = threadIdx.x;
}

extern "C" __global__ void probe_cp_async_mma(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  __shared__ __align__(16) __nv_bfloat16 sa[16 * 16];
  __shared__ __align__(16) __nv_bfloat16 sb[16 * 8];
  uint32_t dst = (uint32_t)__cvta_generic_to_shared(sa + threadIdx.x * 8);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(a + threadIdx.x * 8));
  if (threadIdx.x < 16) {
    uint32_t dstb = (uint32_t)__cvta_generic_to_shared(sb + threadIdx.x * 8);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(dstb), "l"(b + threadIdx.x * 8));
  }
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncwarp();
  uint32_t a0, a1, a2, a3, b0, b1;
  uint32_t sa_addr = (uint32_t)__cvta_generic_to_shared(sa + (threadIdx.x % 16) * 16 + (threadIdx.x / 16) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(sa_addr));
  uint32_t sb_addr = (uint32_t)__cvta_generic_to_shared(sb + (threadIdx.x % 16) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(sb_addr));
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  c[threadIdx.x * 4 + 0] = d0; c[threadIdx.x * 4 + 1] = d1; c[threadIdx.x * 4 + 2] = d2; c[threadIdx.x * 4 + 3] = d3;
}

extern "C" __global__ void probe_stmatrix(__nv_bfloat16* out) {
  __shared__ __align__(16) __nv_bfloat16 s[8 * 8 * 4];
  uint32_t r0 = threadIdx.x, r1 = threadIdx.x + 1, r2 = threadIdx.x + 2, r3 = threadIdx.x + 3;
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(s + (threadIdx.x % 32) * 8);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
  __syncwarp();
  for (int i = threadIdx.x; i < 256; i += 32) out[i] = s[i];
}
