// Gated DeltaNet on CUDA (gdn.h, cpu/gdn_cpu.h): the gating, and per sequence the causal conv1d over
// its conv state followed by the delta rule with an fp32 recurrent state in place (a recurrent
// kernel for decode, a chunked one for prefill).
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void gdn_gating(CudaContext& ctx, const TensorView& a, const TensorView& b, const TensorView& A_log,
                const TensorView& dt_bias, const TensorView& g, const TensorView& beta);
void gdn_sequence(CudaContext& ctx, const GdnDims& dims, const TensorView& conv_weight, const GdnSeqDesc& seq,
                  const TensorView& x, const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                  const TensorView& core_out);

}  // namespace fp4serve::kernels::cuda
