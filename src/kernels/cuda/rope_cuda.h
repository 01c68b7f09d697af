// Rotary embeddings on CUDA: the text model's partial interleaved M-RoPE (rope.h) and the vision
// tower's per-row cos/sin tables (vision.h).
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void rope(CudaContext& ctx, const TensorView& x, const TensorView& positions, const RopeConfig& cfg);
void rope_table(CudaContext& ctx, const TensorView& x, const TensorView& cos, const TensorView& sin);

}  // namespace fp4serve::kernels::cuda
