// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/elementwise_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void embedding(CudaContext& ctx, const TensorView& table, const TensorView& ids, const TensorView& out) {
  throw CudaError("embedding", "not implemented yet", cudaErrorNotSupported);
}

void to_bf16(CudaContext& ctx, const TensorView& x, const TensorView& out) {
  throw CudaError("to_bf16", "not implemented yet", cudaErrorNotSupported);
}

void round_bf16(CudaContext& ctx, const TensorView& x) {
  throw CudaError("round_bf16", "not implemented yet", cudaErrorNotSupported);
}

void residual_add(CudaContext& ctx, const TensorView& x, const TensorView& y) {
  throw CudaError("residual_add", "not implemented yet", cudaErrorNotSupported);
}

void bias_activation(CudaContext& ctx, const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) {
  throw CudaError("bias_activation", "not implemented yet", cudaErrorNotSupported);
}

void gather_rows(CudaContext& ctx, const TensorView& x, std::span<const int64_t> rows, const TensorView& out) {
  throw CudaError("gather_rows", "not implemented yet", cudaErrorNotSupported);
}

void state_copy(CudaContext& ctx, std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims) {
  throw CudaError("state_copy", "not implemented yet", cudaErrorNotSupported);
}

void state_zero(CudaContext& ctx, std::span<const GdnStateRef> dst, const GdnDims& dims) {
  throw CudaError("state_zero", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
