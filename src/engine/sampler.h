// The sampler: one token (and, when asked, its logprobs) per logits row, with vLLM V1's semantics
// and order (vllm/v1/sample/sampler.py):
//   raw logits -> [logprobs of the raw logits, logprobs_mode "raw_logprobs"]
//   -> bad_words -> min_tokens mask -> logit_bias -> repetition/frequency/presence penalties
//   -> greedy argmax (temperature < 1e-5), or temperature -> min_p -> top-k -> top-p -> draw.
// See sampler_processors.h and sampler_selection.h for each stage.
//
// Padding rows of the lm_head (ids >= valid_vocab_size, e.g. 248077..248319 for Qwen3.6) are not
// tokens: they are never sampled and are left out of the logprobs' softmax. (vLLM keeps them in
// the softmax; their logits are untrained and far below the rest, so the difference is far below
// float precision in practice.)
//
// Randomness: a seeded request's draw at output position p is a function of (seed, p) alone
// (Philox, sampler_rng.h), so the same seed gives the same tokens whatever the batch, the row
// order, the thread count or a preemption in between. Unseeded random rows take consecutive draws
// of the engine generator (SamplerConfig::seed) in row order. Streams are not bit-identical to
// vLLM's torch generators; the guarantees are the same.
//
// Threading: sample() runs rows in parallel with OpenMP; a Sampler itself is used by one thread
// (the engine thread), since the engine generator's counter advances on each call.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampling_params.h"

namespace fp4serve::engine {

struct SamplerConfig {
  int64_t vocab_size = 0;        // length of a logits row (lm_head rows: 248320 for Qwen3.6)
  int64_t valid_vocab_size = 0;  // ids that are tokens (tokenizer size: 248077); 1..vocab_size
  std::vector<int64_t> eos_token_ids;  // generation_config EOS ids, masked under min_tokens
  uint64_t seed = 0;                   // engine generator, for requests without a seed
  int num_threads = 0;                 // rows sampled in parallel; 0 = OpenMP's default
};

struct SampleInput {
  // The row, vocab_size floats. Edited during the call (sparse edits for bias and penalties) and
  // restored before the call returns.
  std::span<float> logits;
  const SamplingParams* params = nullptr;  // prepared by prepare_sampling_params
  std::span<const int32_t> prompt_ids;
  std::span<const int32_t> output_ids;  // tokens generated so far; its size is the step index
};

struct SampleOutput {
  int32_t token = -1;
  std::optional<SampleLogprobs> logprobs;  // set when params->logprobs is set
};

class Sampler {
 public:
  // Throws EngineConfigError for an impossible vocabulary.
  explicit Sampler(SamplerConfig config);

  // One output per input, in order. Throws EngineLogicError (before sampling anything) for a row
  // of the wrong length or a missing params pointer.
  std::vector<SampleOutput> sample(std::span<const SampleInput> batch);

  void set_num_threads(int num_threads) { config_.num_threads = num_threads; }
  const SamplerConfig& config() const { return config_; }
  // Draws the engine generator has handed out so far (unseeded random rows).
  uint64_t engine_draws() const { return engine_draws_; }

 private:
  SamplerConfig config_;
  uint64_t engine_draws_ = 0;
};

}  // namespace fp4serve::engine
