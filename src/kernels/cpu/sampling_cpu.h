// The CPU implementation of the sampling op (sampling.h): rows in parallel (OpenMP, dynamic
// schedule: a greedy row costs far less than a top-p one), each through vLLM V1's stages in their
// order: sampling_processors.h (allowed ids, bad words, min_tokens, logit bias, penalties, the
// thinking budget, on the raw row) ->
// sampling_selection.h (greedy argmax, or temperature, min_p, top-k, top-p and the draw with a
// uniform from sampling_rng.h) -> the row restored -> sampling_logprobs.h (raw logprobs: the top-N,
// or the logprob_token_ids').
//
// Scratch: each thread keeps its own (edit log, penalty counts, selection buffers), reserved for
// the whole valid vocabulary on the thread's first row; the calling thread keeps one uniform per
// row, grown to the largest call. So once every thread has sampled a row and the calling thread has
// seen its largest batch, sample_rows allocates nothing (sampling_op_test counts).
#pragma once

#include <span>

#include "kernels/sampling.h"

namespace fp4serve::kernels::cpu {

// logits: [rows.size(), config.vocab_size] fp32 with row stride `row_stride` floats (edited and
// restored during the call). Throws std::invalid_argument, before any row is touched, for an
// impossible config, a row without options, a `top` too small for its logprobs, a logprob id
// outside the row, or out.size() != rows.size().
// The call's checks (every backend's sample() makes them before touching anything): throws
// std::invalid_argument as sample_rows documents.
void check_sample_call(std::span<const SampleRow> rows, const SamplingConfig& config, std::span<SampleResult> out);

void sample_rows(float* logits, int64_t row_stride, std::span<const SampleRow> rows, const SamplingConfig& config,
                 std::span<SampleResult> out);

}  // namespace fp4serve::kernels::cpu
