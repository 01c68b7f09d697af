// The norms on CUDA: Qwen's (1 + w) RMSNorm, GDN's gated RMSNorm and the vision tower's LayerNorm,
// one warp per row reducing in the CPU's canonical 32-lane order (kernel_table.h), so that the sums
// equal the CPU op's bit for bit.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void rmsnorm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out);
void rmsnorm_gated(CudaContext& ctx, const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                   const TensorView& out);
void layernorm(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& b, float eps,
               const TensorView& out);

}  // namespace fp4serve::kernels::cuda
