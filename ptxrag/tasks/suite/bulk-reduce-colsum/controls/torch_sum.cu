// Control: hands the reduction to libtorch (at::sum), which the task forbids. It would not even link here;
// the static stage must reject it from the source alone.
#include "ptxrag_abi.h"
#include <ATen/ATen.h>

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  const ptxrag_tensor& x = a->inputs[0];
  at::Tensor t = at::from_blob(x.data, {x.shape[0], x.shape[1]}, at::device(at::kCUDA).dtype(at::kFloat));
  at::Tensor y = at::from_blob(a->outputs[0].data, {x.shape[1]}, at::device(at::kCUDA).dtype(at::kFloat));
  y.copy_(at::sum(t, 0));
  return 0;
}
