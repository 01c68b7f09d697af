// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/moe_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

MoeHandle prepare_moe(CudaContext& ctx, const MoeWeights& moe) {
  throw CudaError("prepare_moe", "not implemented yet", cudaErrorNotSupported);
}

void moe(CudaContext& ctx, const TensorView& x, const MoeHandle& moe, const TensorView& out) {
  throw CudaError("moe", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
