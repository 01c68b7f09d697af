// The logits processors vLLM V1 applies to the raw logits before sampling, in its order
// (vllm/v1/sample/sampler.py apply_logits_processors; BUILTIN_LOGITS_PROCESSORS):
//   0. bad_words: -inf for the last token of each bad-word sequence the output is one token short
//      of (bad_words.h);
//   1. min_tokens: the stop tokens (request stop_token_ids + the model's EOS ids) get -inf while
//      fewer than min_tokens tokens have been generated (MinTokensLogitsProcessor);
//   2. logit_bias: bias added to the token's logit (LogitBiasLogitsProcessor);
//   3. penalties (vllm/model_executor/layers/utils.py apply_penalties): repetition on every token
//      of prompt or output (positive logits divided by it, others multiplied), then frequency
//      (times the token's count in the output), then presence (once if in the output).
// All of them touch a few tokens only, so they edit the row in place and log each original value;
// undo() puts the raw row back (the logprobs are computed from raw logits, and the caller's
// buffer is left as it came).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace fp4serve::engine {

class LogitsEditLog {
 public:
  void set(std::span<float> row, int32_t token, float value) {
    edits_.emplace_back(token, row[static_cast<std::size_t>(token)]);
    row[static_cast<std::size_t>(token)] = value;
  }
  // Restores the row; entries are replayed newest first so a token edited twice ends at its
  // first recorded (raw) value.
  void undo(std::span<float> row) {
    for (auto it = edits_.rbegin(); it != edits_.rend(); ++it) {
      row[static_cast<std::size_t>(it->first)] = it->second;
    }
    edits_.clear();
  }
  bool empty() const { return edits_.empty(); }

 private:
  std::vector<std::pair<int32_t, float>> edits_;
};

// Scratch for apply_penalties: a per-token count array that is all zero between calls (only the
// touched entries are reset), so a call costs O(prompt + output), not O(vocab).
struct PenaltyScratch {
  std::vector<uint32_t> counts;  // bit 31: token is in the prompt; bits 0..30: count in the output
  std::vector<int32_t> touched;
};

// bad_words: -inf on banned_next_tokens(params.bad_words_token_ids, output_ids).
void apply_bad_words(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> output_ids, LogitsEditLog& log);

// min_tokens: mask `stop_ids` (already the union of the request's and the model's) when
// num_output < min_tokens. Ids outside the row are ignored.
void apply_min_tokens(std::span<float> row, const SamplingParams& params, std::size_t num_output,
                      std::span<const int64_t> model_eos_ids, LogitsEditLog& log);

// logit_bias, in float32 as vLLM adds it. Ids outside the row are ignored (validation rejects
// them).
void apply_logit_bias(std::span<float> row, const SamplingParams& params, LogitsEditLog& log);

// Repetition, frequency and presence penalties; a no-op when all three are at their defaults.
void apply_penalties(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch, LogitsEditLog& log);

}  // namespace fp4serve::engine
