// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/rope_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void rope(CudaContext& ctx, const TensorView& x, const TensorView& positions, const RopeConfig& cfg) {
  throw CudaError("rope", "not implemented yet", cudaErrorNotSupported);
}

void rope_table(CudaContext& ctx, const TensorView& x, const TensorView& cos, const TensorView& sin) {
  throw CudaError("rope_table", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
