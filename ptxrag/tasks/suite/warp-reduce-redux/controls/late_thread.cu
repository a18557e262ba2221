// Control (adversarial, class 8, work after return): ptxrag_launch starts a detached host thread and returns
// at once; the thread enqueues the reduction on args->stream a moment later. A stream synchronisation after
// the call may or may not wait for it; the events around the call never see it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <chrono>
#include <thread>

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

extern "C" int ptxrag_launch(const ptxrag_args* a) {
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
  const int* xp = (const int*)x.data;
  int* yp = (int*)y.data;
  const long long ld = x.strides[0];
  cudaStream_t s = (cudaStream_t)a->stream;
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    row_sum<<<(int)blocks, threads, 0, s>>>(xp, yp, rows, cols, ld);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }).detach();
  return 0;
}
