// Sampling on CUDA (sampling.h's semantics and numerics contract): the processors, greedy, and the
// random path over the full vocabulary rows in device memory; the uniforms come from the host's
// Philox (cpu/sampling_rng.h) so the draws equal the CPU op's.
#pragma once

#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
            std::span<SampleResult> out);

}  // namespace fp4serve::kernels::cuda
