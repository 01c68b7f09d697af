// The CPU implementation of the sampling op (sampling.h): rows in parallel, each with vLLM V1's
// processor order; scratch per thread.
#pragma once

#include <span>

#include "kernels/sampling.h"

namespace fp4serve::kernels::cpu {

// logits: [rows.size(), config.vocab_size] fp32 (edited and restored during the call).
void sample_rows(float* logits, std::span<const SampleRow> rows, const SamplingConfig& config,
                 std::span<SampleResult> out);

}  // namespace fp4serve::kernels::cpu
