// Linears on CUDA (weights.h gives each format's numbers): BF16, FP8 per-tensor, FP8 128-block,
// NVFP4 and INT4, y[M, N] f32 = x[M, K] bf16 @ W^T. Weights are repacked into the kernel's layout and
// uploaded by prepare_linear, through the loader (weight_upload.h); the kernels dequantize in
// registers.
//
// Batch invariance: an output row's value depends on its own x row only (one fixed K order per
// format and shape, never a split-K or tile choice that depends on M).
#pragma once

#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

// Packs `w` into the kernel's layout and stages it to the device through ctx.loader, then hands the
// checkpoint's byte ranges of `w` to `release` (the host keeps no copy).
LinearHandle prepare_linear(CudaContext& ctx, const WeightView& w, const ReleaseSource& release = {});
void linears(CudaContext& ctx, const TensorView& x, std::span<const LinearOut> outs);

// The MoE's expert-grouped linear: rows [offsets[e], offsets[e+1]) of x [R, K] bf16 go through
// experts[e] (handles of prepare_linear, one format and shape), into out [R, N] f32. `offsets` is
// device memory [E + 1] i32 written by earlier kernels on the stream (never read back by the host);
// R = offsets[E] <= x's rows. Each row's result equals linears() of that row alone.
struct GroupedLinear {
  const void* impl = nullptr;  // the module's own table of expert weights on the device
  int64_t experts = 0, n = 0, k = 0;
};
GroupedLinear prepare_grouped(CudaContext& ctx, std::span<const LinearHandle> experts);
void grouped_linear(CudaContext& ctx, const GroupedLinear& g, const TensorView& x, const int32_t* offsets,
                    const TensorView& out);

}  // namespace fp4serve::kernels::cuda
