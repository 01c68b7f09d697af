// The sampling op of the backend seam (Backend::sample): one token per logits row, with vLLM V1's
// semantics and order (vllm/v1/sample/sampler.py):
//   raw logits -> [logprobs of the raw logits, logprobs_mode "raw_logprobs"]
//   -> bad_words -> min_tokens mask -> logit_bias -> repetition/frequency/presence penalties
//   -> greedy argmax (temperature < 1e-5), or temperature -> min_p -> top-k -> top-p -> draw.
// Padding rows of the lm_head (ids >= valid_vocab_size) are never sampled and are left out of the
// logprobs' softmax.
//
// Randomness: a seeded row's draw at output position p is a function of (seed, p) alone (Philox), so
// the same seed gives the same tokens whatever the batch, the row order, the thread count or a
// preemption in between. Unseeded random rows take consecutive draws of the engine generator
// (SamplingConfig::seed, *engine_draws) in row order.
//
// Memory: the op writes into what the caller hands it (results, top-N arrays) and uses scratch the
// backend reserved, so a step's sampling allocates nothing. The logits rows may be edited during the
// call (sparse edits for bias and penalties) and are restored before it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace fp4serve::kernels {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// A request's sampling settings in the op's form, made once when the request is admitted (the engine
// validates and resolves vLLM's SamplingParams into this).
struct SamplingOptions {
  double temperature = 1.0;         // < 1e-5: greedy
  double top_p = 1.0;
  int64_t top_k = 0;                // <= 0: off
  double min_p = 0.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double repetition_penalty = 1.0;
  std::optional<uint64_t> seed;
  std::optional<int64_t> logprobs;  // top-N per sampled token; -1 = whole valid vocabulary
  int64_t min_tokens = 0;           // EOS and stop ids masked while fewer outputs than this
  std::vector<int64_t> min_tokens_stop_ids;            // ids masked under min_tokens (EOS + stop_token_ids)
  std::vector<std::pair<int32_t, float>> logit_bias;   // valid ids only
  std::vector<std::vector<int32_t>> bad_words;         // token sequences (bad_words.h)
};

struct SampleRow {
  const SamplingOptions* options = nullptr;
  std::span<const int32_t> prompt_ids;
  std::span<const int32_t> output_ids;  // generated so far; its size is the output position
  // Room for the top-N logprobs when options->logprobs is set (at least that many entries; the
  // whole valid vocabulary for -1).
  std::span<TokenLogprob> top;
};

struct SampleResult {
  int32_t token = -1;
  bool has_logprobs = false;
  float logprob = 0.0f;   // the sampled token's raw logprob
  int64_t rank = 0;       // 1-based; tied tokens share the worse rank (vLLM batched_count_greater_than)
  int64_t num_top = 0;    // entries written to the row's `top`, best first (ties: lower id first)
};

struct SamplingConfig {
  int64_t vocab_size = 0;        // length of a logits row (lm_head rows)
  int64_t valid_vocab_size = 0;  // ids that are tokens; 1..vocab_size
  uint64_t seed = 0;             // engine generator, for rows without a seed
  uint64_t* engine_draws = nullptr;  // the engine generator's counter, advanced per unseeded random row
  int num_threads = 0;           // rows sampled in parallel; 0 = the backend's default
};

}  // namespace fp4serve::kernels
