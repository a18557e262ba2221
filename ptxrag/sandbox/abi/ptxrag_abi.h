/* ptxrag candidate ABI, version 1.
 *
 * A candidate is one .cu file that includes this header and defines exactly one entry point:
 *
 *     extern "C" int ptxrag_launch(const ptxrag_args* args);
 *
 * The sandbox compiles it with nvcc into a shared library, loads it in a child process and calls
 * ptxrag_launch with the task's tensors (already on the GPU) and scalars. The entry point must
 *   - enqueue all of its GPU work on args->stream (never the legacy default stream, never a stream
 *     of its own: the evaluator times the stream and checks that no work escapes it);
 *   - not synchronize the device and not allocate per call (use args->workspace if the task gives one);
 *   - return 0 on success, or a non-zero code (a cudaError_t, or PTXRAG_ERR_* below) on failure.
 * All shapes arrive at run time in the tensor descriptors; never hard-code a problem size.
 * Inputs come first in args->inputs, in the order the task lists them; likewise outputs.
 *
 * TMA tensor maps are built inside the candidate on the host, from the descriptors. There is no
 * libcuda stub to link on machines without a GPU, so reach the driver entry point through the
 * runtime: ptxrag_get_driver_fn("cuTensorMapEncodeTiled") below does that.
 */
#ifndef PTXRAG_ABI_H
#define PTXRAG_ABI_H

#include <stdint.h>
#include <stddef.h>
#include <cuda_runtime.h>

#define PTXRAG_ABI_VERSION 1
#define PTXRAG_MAX_DIMS 8

/* Element types. Values are part of the ABI: never renumber. */
typedef enum ptxrag_dtype {
  PTXRAG_F32 = 0,
  PTXRAG_F16 = 1,
  PTXRAG_BF16 = 2,
  PTXRAG_F64 = 3,
  PTXRAG_I32 = 4,
  PTXRAG_I64 = 5,
  PTXRAG_I8 = 6,
  PTXRAG_U8 = 7,
  PTXRAG_FP8_E4M3 = 8,
  PTXRAG_FP8_E5M2 = 9,
  PTXRAG_U32 = 10,
  PTXRAG_I16 = 11
} ptxrag_dtype;

/* A dense tensor on the GPU. Strides are in elements (not bytes), like torch.Tensor.stride(). */
typedef struct ptxrag_tensor {
  void* data;                       /* device pointer, 256-byte aligned when the tensor is contiguous */
  int32_t dtype;                    /* a ptxrag_dtype */
  int32_t ndim;                     /* number of dimensions, 0..PTXRAG_MAX_DIMS */
  int64_t shape[PTXRAG_MAX_DIMS];   /* sizes; unused entries are 1 */
  int64_t strides[PTXRAG_MAX_DIMS]; /* element strides; unused entries are 0 */
} ptxrag_tensor;

/* Everything one call receives. */
typedef struct ptxrag_args {
  int32_t abi_version;              /* PTXRAG_ABI_VERSION */
  int32_t n_inputs;
  int32_t n_outputs;
  int32_t n_scalars;
  const ptxrag_tensor* inputs;      /* read-only tensors, in task order */
  const ptxrag_tensor* outputs;     /* tensors to write, in task order; poisoned (NaN) before each check */
  const double* scalars;            /* scalar parameters, in task order (integers arrive as exact doubles) */
  cudaStream_t stream;              /* the only stream to launch on */
  void* workspace;                  /* device scratch of workspace_bytes, zero-filled once; may be NULL */
  size_t workspace_bytes;
} ptxrag_args;

/* Error codes a candidate may return besides cudaError_t values. */
#define PTXRAG_ERR_BAD_ARGS 10001        /* unexpected tensor count, dtype or rank */
#define PTXRAG_ERR_UNSUPPORTED_SHAPE 10002
#define PTXRAG_ERR_DRIVER_ENTRY 10003    /* a driver function could not be resolved */
#define PTXRAG_ERR_TENSOR_MAP 10004      /* cuTensorMapEncode* failed */

#ifdef __cplusplus
#define PTXRAG_EXTERN_C extern "C"
#else
#define PTXRAG_EXTERN_C
#endif

/* The one entry point a candidate defines. */
PTXRAG_EXTERN_C int ptxrag_launch(const ptxrag_args* args);

/* Size in bytes of one element of dtype (0 for an unknown dtype). */
static inline size_t ptxrag_dtype_size(int32_t dtype) {
  switch (dtype) {
    case PTXRAG_F64: case PTXRAG_I64: return 8;
    case PTXRAG_F32: case PTXRAG_I32: case PTXRAG_U32: return 4;
    case PTXRAG_F16: case PTXRAG_BF16: case PTXRAG_I16: return 2;
    case PTXRAG_I8: case PTXRAG_U8: case PTXRAG_FP8_E4M3: case PTXRAG_FP8_E5M2: return 1;
    default: return 0;
  }
}

/* Number of elements of a tensor. */
static inline int64_t ptxrag_numel(const ptxrag_tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* 1 when the tensor is densely packed in row-major order, else 0. */
static inline int ptxrag_is_contiguous(const ptxrag_tensor* t) {
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
    expect *= t->shape[i];
  }
  return 1;
}

/* Resolve a CUDA driver API function (e.g. "cuTensorMapEncodeTiled") through the runtime, so the
 * candidate needs no -lcuda. Returns NULL when it cannot be found. Cast the result to the matching
 * PFN_* type from <cudaTypedefs.h>. */
static inline void* ptxrag_get_driver_fn(const char* name) {
  void* fn = NULL;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    return NULL;
  }
  return fn;
}

#endif /* PTXRAG_ABI_H */
