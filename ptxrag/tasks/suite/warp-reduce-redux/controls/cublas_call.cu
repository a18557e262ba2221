// Control: hands the work to cuBLAS (a matrix-vector product with a vector of ones), which is forbidden.
#include "ptxrag_abi.h"
#include <cublas_v2.h>

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  static cublasHandle_t h = nullptr;
  if (!h) cublasCreate(&h);
  cublasSetStream(h, a->stream);
  return 0;  // (the int GEMV would go here)
}
