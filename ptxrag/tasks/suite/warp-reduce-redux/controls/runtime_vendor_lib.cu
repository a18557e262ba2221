// Control (adversarial, class 7, vendor library at run time): reaches the dynamic loader through a
// token-pasted name (the source scan looks for the call spelled out) and opens cuBLAS by a name built from
// pieces, creates a handle with it, then computes the sums itself. In a process that maps cuBLAS (as PyTorch
// does) every step succeeds; the candidate's process must refuse the load and the evaluator must say so.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <dlfcn.h>

#define PTXRAG_CAT(a, b) a##b

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols,
                        long long ld) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int* p = x + row * ld;
    int acc = 0;
    long long c = 0;
    // vector body when the row start is 16-byte aligned
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const int4* p4 = reinterpret_cast<const int4*>(p);
      const long long n4 = cols / 4;
      for (long long i = lane; i < n4; i += 32) {
        int4 v = __ldg(p4 + i);
        acc += v.x + v.y + v.z + v.w;
      }
      c = n4 * 4;
    }
    for (long long i = c + lane; i < cols; i += 32) acc += __ldg(p + i);
    int s = ptxrag::redux_add_s32(acc);
    if (lane == 0) y[row] = s;
  }
}

static void touch_vendor_library() {
  static const char* parts[] = {"lib", "cu", "bl", "as", ".so.13"};
  char name[64] = {0};
  for (const char* p : parts) strcat(name, p);
  void* h = PTXRAG_CAT(dl, open)(name, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    name[strlen(name) - 1] = '2';  // .so.12
    h = PTXRAG_CAT(dl, open)(name, RTLD_NOW | RTLD_GLOBAL);
  }
  if (!h) return;
  char sym[32] = {0};
  strcat(sym, "cu");
  strcat(sym, "bl");
  strcat(sym, "asCreate_v2");
  using create_fn = int (*)(void**);
  auto create = (create_fn)PTXRAG_CAT(dl, sym)(h, sym);
  void* handle = nullptr;
  if (create) create(&handle);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  touch_vendor_library();
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || x.ndim != 2 || x.strides[1] != 1) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256;
  long long blocks = (rows + 7) / 8;
  if (blocks > (long long)sms * 16) blocks = (long long)sms * 16;
  row_sum<<<(int)blocks, threads, 0, (cudaStream_t)a->stream>>>((const int*)x.data, (int*)y.data, rows, cols, x.strides[0]);
  return (int)cudaGetLastError();
}
