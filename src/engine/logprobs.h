// Logprobs of a generated or prompt token in the engine's output form, vLLM V1 style
// (vllm/v1/sample/sampler.py, logprobs_mode "raw_logprobs", the default): log_softmax of the RAW
// logits (before logit bias, penalties, temperature and top-k/top-p/min-p), the token's logprob and
// rank, and the top-N. The backend's sampling op computes them (kernels/sampling.h); this is the
// form the outputs and the server carry.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/sampling.h"

namespace fp4serve::engine {

using TokenLogprob = kernels::TokenLogprob;

struct SampleLogprobs {
  TokenLogprob sampled;
  // 1-based: how many tokens have a logprob >= the sampled one's (vLLM batched_count_greater_than,
  // so tied tokens share the worse rank).
  int64_t sampled_rank = 0;
  // The N most likely tokens, best first (ties: lower id first); ranks are 1..N. vLLM returns the
  // sampled token first and these after it; the server merges them into the response's dict.
  std::vector<TokenLogprob> top;
};

// vLLM's PromptLogprobs: one entry per prompt token, none for the first (no row predicts it).
// Entry i scores prompt token i under the logits row of position i - 1: `sampled` is that token
// with its rank, `top` the row's top-N (the same computation as a sampled token's).
using PromptLogprobs = std::vector<std::optional<SampleLogprobs>>;

// The op's result for a row that asked for logprobs, with the row's top entries.
SampleLogprobs to_sample_logprobs(const kernels::SampleResult& result, std::span<const TokenLogprob> top);

// `logits` is a raw host row restricted to the valid vocabulary (padding rows of the lm_head are
// not part of the distribution). num_top is clamped to logits.size(). The row must have a finite
// max. (kernels::host_token_logprobs, into a new SampleLogprobs.)
SampleLogprobs compute_sample_logprobs(std::span<const float> logits, int32_t sampled_token, int64_t num_top);

}  // namespace fp4serve::engine
