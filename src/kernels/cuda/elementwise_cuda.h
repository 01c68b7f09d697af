// Row-wise and element-wise ops of the seam on CUDA (twins of the CPU backend's; backend.h gives the
// semantics): the embedding gather, bf16 conversion, the residual add, bias + activation, row gather
// and GDN state copy/zero.
#pragma once

#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void embedding(CudaContext& ctx, const TensorView& table, const TensorView& ids, const TensorView& out);
void to_bf16(CudaContext& ctx, const TensorView& x, const TensorView& out);
void round_bf16(CudaContext& ctx, const TensorView& x);
void residual_add(CudaContext& ctx, const TensorView& x, const TensorView& y);
void bias_activation(CudaContext& ctx, const TensorView& x, const TensorView& bias, Activation act, const TensorView& out);
void gather_rows(CudaContext& ctx, const TensorView& x, std::span<const int64_t> rows, const TensorView& out);
void state_copy(CudaContext& ctx, std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims);
void state_zero(CudaContext& ctx, std::span<const GdnStateRef> dst, const GdnDims& dims);

}  // namespace fp4serve::kernels::cuda
