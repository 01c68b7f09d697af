// The sparse MoE block on CUDA (moe.h's numerics, HF eager combine): router linear, softmax/top-k
// with HF's tie rule, tokens sorted by expert on the device, grouped expert linears, SwiGLU, the
// routed combine in ascending expert id, the shared expert with its sigmoid gate.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

// Each of the block's weights goes to `release` as soon as it is staged (prepare_linear), so the
// host never holds more than the weight being packed.
MoeHandle prepare_moe(CudaContext& ctx, const MoeWeights& moe, const ReleaseSource& release = {});
void moe(CudaContext& ctx, const TensorView& x, const MoeHandle& moe, const TensorView& out);

}  // namespace fp4serve::kernels::cuda
