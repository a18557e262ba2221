// Unit kernel: the prerequisite kernel lets its dependent be scheduled early (launch_dependents); the dependent,
// launched with programmatic stream serialization, waits (griddepcontrol.wait) before reading the
// prerequisite's output.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__global__ void produce(const float* __restrict__ x, float* __restrict__ t, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) t[i] = 2.f * x[i];
  ptxrag::griddep_launch_dependents();  // allows scheduling of the dependent; publishes nothing
}

__global__ void consume(const float* __restrict__ t, float* __restrict__ y, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // prologue: may overlap `produce`
  ptxrag::griddep_wait();  // `produce` has completed and its writes are visible
  if (i < n) y[i] = t[i] + 1.f;
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_F32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long n = ptxrag_numel(&x);
  if (a->workspace == nullptr || a->workspace_bytes < (size_t)n * 4) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  if (n == 0) return 0;
  float* t = (float*)a->workspace;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  produce<<<blocks, 256, 0, a->stream>>>((const float*)x.data, t, n);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(256);
  cfg.stream = a->stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, consume, (const float*)t, (float*)a->outputs[0].data, n);
  if (e != cudaSuccess) return (int)e;
  return (int)cudaGetLastError();
}
