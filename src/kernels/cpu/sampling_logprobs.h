// Logprobs of a token, vLLM V1 style (vllm/v1/sample/sampler.py, logprobs_mode "raw_logprobs", the
// default): log_softmax of the RAW logits (before bad words, min_tokens, logit bias, penalties,
// temperature and top-k/top-p/min-p), the token's logprob and rank, and the top-N.
// kernels::host_token_logprobs (sampling.h) is the entry point; these are its parts.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/sampling.h"

namespace fp4serve::kernels::cpu {

// log(sum(exp(logits))) in double, max-shifted; the max itself when it is not finite.
double log_sum_exp(std::span<const float> logits);

// The min(n, top.size()) best entries of `logits` (ids and raw logits), best first: higher logit
// first, lower id among equals (torch.topk leaves tie order unspecified; we pick the deterministic
// one). `top` is the heap's storage: nothing is allocated. Returns the number written.
std::size_t top_logits(std::span<const float> logits, std::size_t n, std::span<TokenLogprob> top);

}  // namespace fp4serve::kernels::cpu
