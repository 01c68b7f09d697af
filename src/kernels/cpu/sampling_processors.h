// The logits processors vLLM V1 applies to the raw logits before sampling, in its order
// (vllm/v1/sample/sampler.py apply_logits_processors; BUILTIN_LOGITS_PROCESSORS):
//   a. allowed_token_ids: -inf for every token not in the request's list (vLLM's
//      allowed_token_ids_mask, applied first);
//   0. bad_words: -inf for the last token of each bad-word sequence the output is one token short
//      of (sampling_bad_words.h);
//   1. min_tokens: the stop tokens (request stop_token_ids + the model's EOS ids) get -inf while
//      fewer than min_tokens tokens have been generated (MinTokensLogitsProcessor);
//   2. logit_bias: bias added to the token's logit (LogitBiasLogitsProcessor);
//   3. penalties (vllm/model_executor/layers/utils.py apply_penalties): repetition on every token
//      of prompt or output (positive logits divided by it, others multiplied), then frequency
//      (times the token's count in the output), then presence (once if in the output);
//   4. thinking budget: the forced end-of-reasoning token (kernels/reasoning_budget.h) gets logit
//      1e9, after the penalties, as vLLM's thinking-budget state holder writes it (index_put 1e9):
//      it wins the argmax and every draw, even over a mask above.
// All of them touch a few tokens only, so they edit the row in place and log each original value;
// undo() puts the raw row back (the logprobs are computed from raw logits, and the caller's
// buffer is left as it came).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/sampling.h"

namespace fp4serve::kernels::cpu {

class LogitsEditLog {
 public:
  // A token's raw value is logged on its first edit only, so the log never holds more entries
  // than the row has tokens.
  void set(std::span<float> row, int32_t token, float value) {
    const auto t = static_cast<std::size_t>(token);
    if (logged_.size() < row.size()) logged_.resize(row.size(), 0);
    if (!logged_[t]) {
      logged_[t] = 1;
      edits_.emplace_back(token, row[t]);
    }
    row[t] = value;
  }
  // Restores the row to the values it had before the first set().
  void undo(std::span<float> row) {
    for (const auto& [token, raw] : edits_) {
      row[static_cast<std::size_t>(token)] = raw;
      logged_[static_cast<std::size_t>(token)] = 0;
    }
    edits_.clear();
  }
  bool empty() const { return edits_.empty(); }
  // Capacity for rows of up to `vocab` tokens: set() never allocates afterwards.
  void reserve(std::size_t vocab) {
    if (logged_.size() < vocab) logged_.resize(vocab, 0);
    edits_.reserve(vocab);
  }

 private:
  std::vector<std::pair<int32_t, float>> edits_;
  std::vector<uint8_t> logged_;  // per token: its raw value is in edits_
};

// Scratch for apply_penalties: a per-token count array that is all zero between calls (only the
// touched entries are reset), so a call costs O(prompt + output), not O(vocab).
struct PenaltyScratch {
  std::vector<uint32_t> counts;  // bit 31: token is in the prompt; bits 0..30: count in the output
  std::vector<int32_t> touched;

  // Capacity for rows of up to `vocab` tokens.
  void reserve(std::size_t vocab) {
    if (counts.size() < vocab) counts.assign(vocab, 0u);
    touched.reserve(vocab);
  }
};

// The grammar bitmask of structured output: -inf on every token of the row whose bit is clear
// (bit t of word t / 32). Written straight into the row: the caller keeps a copy to put back.
void apply_token_bitmask(std::span<float> row, std::span<const int32_t> bitmask);

// allowed_token_ids: -inf on every token of the row not in options.allowed_token_ids (sorted);
// a no-op when the list is empty.
void apply_allowed_token_ids(std::span<float> row, const SamplingOptions& options, LogitsEditLog& log);

// bad_words: -inf on the tokens sampling_bad_words.h bans after output_ids.
void apply_bad_words(std::span<float> row, const SamplingOptions& options,
                     std::span<const int32_t> output_ids, LogitsEditLog& log);

// min_tokens: mask options.min_tokens_stop_ids (the request's stop ids and the model's EOS ids)
// when num_output < min_tokens. Ids outside the row are ignored.
void apply_min_tokens(std::span<float> row, const SamplingOptions& options, std::size_t num_output,
                      LogitsEditLog& log);

// logit_bias, in float32 as vLLM adds it. Ids outside the row are ignored (validation rejects
// them).
void apply_logit_bias(std::span<float> row, const SamplingOptions& options, LogitsEditLog& log);

// Repetition, frequency and presence penalties; a no-op when all three are at their defaults.
void apply_penalties(std::span<float> row, const SamplingOptions& options,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch, LogitsEditLog& log);

// Thinking budget: when options.reasoning_budget forces the next token, sets its logit to
// kForcedLogit. A forced id outside the row is ignored.
inline constexpr float kForcedLogit = 1e9f;
void apply_reasoning_budget(std::span<float> row, const SamplingOptions& options,
                            std::span<const int32_t> output_ids, LogitsEditLog& log);

}  // namespace fp4serve::kernels::cpu
