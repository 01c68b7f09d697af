// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/linear_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

LinearHandle prepare_linear(CudaContext& ctx, const WeightView& w) {
  throw CudaError("prepare_linear", "not implemented yet", cudaErrorNotSupported);
}

void linears(CudaContext& ctx, const TensorView& x, std::span<const LinearOut> outs) {
  throw CudaError("linears", "not implemented yet", cudaErrorNotSupported);
}

GroupedLinear prepare_grouped(CudaContext& ctx, std::span<const LinearHandle> experts) {
  throw CudaError("prepare_grouped", "not implemented yet", cudaErrorNotSupported);
}

void grouped_linear(CudaContext& ctx, const GroupedLinear& g, const TensorView& x, const int32_t* offsets,
                    const TensorView& out) {
  throw CudaError("grouped_linear", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
