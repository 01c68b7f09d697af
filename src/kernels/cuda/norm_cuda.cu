// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/norm_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void rmsnorm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) {
  throw CudaError("rmsnorm", "not implemented yet", cudaErrorNotSupported);
}

void rmsnorm_gated(CudaContext& ctx, const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                   const TensorView& out) {
  throw CudaError("rmsnorm_gated", "not implemented yet", cudaErrorNotSupported);
}

void layernorm(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& b, float eps,
               const TensorView& out) {
  throw CudaError("layernorm", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
