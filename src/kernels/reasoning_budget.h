// vLLM's thinking_token_budget, as the sampling op enforces it (docs/vllm-surface.md §4.3)
// [vllm: v1/sample/logits_processor/builtin.py ThinkingTokenBudgetLogitsProcessor, its successor
// the thinking-budget state holder; config/reasoning.py ReasoningConfig]: once a request has
// produced `budget` tokens inside a reasoning block, the end-of-reasoning marker ("</think>" for
// Qwen3) is forced, one token per step, and the model then continues with the answer.
//
// The rule, with the markers given as token sequences (the reasoning parser's start and end
// strings, tokenized without special tokens):
//   - a reasoning block opens after the last start marker and closes with the next end marker;
//   - its token count includes the tokens already in the PROMPT after an open start marker (a
//     Qwen3.6 prompt ends "<think>\n": that "\n" counts, as vLLM counts it), then every output token;
//   - while the block is open and that count is >= budget, the next token is forced to the end
//     marker's next token (the count minus the budget says how much of the marker is out);
//   - a block that starts in the output gets the budget afresh. (vLLM's newest state holder instead
//     closes a block that re-opens after a forced end at once; Qwen3 never re-opens one.)
//
// Everything is a function of the request's own prompt and output tokens, so the forced token of a
// row never depends on the rest of the batch, and a speculative verify row (outputs + drafts) gets
// exactly what the plain decode step at that position would. The prompt is summarised once, at
// admission (summarize_prompt); a step only scans the output back to its last marker.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace fp4serve::kernels {

struct ReasoningBudget {
  int64_t budget = -1;                 // < 0: no budget
  std::vector<int32_t> start_ids;      // "<think>" as token ids
  std::vector<int32_t> end_ids;        // "</think>" as token ids; forced when the budget is spent
  // The prompt's state (summarize_prompt): it ends inside an open block holding this many tokens.
  bool prompt_in_block = false;
  int64_t prompt_block_tokens = 0;

  bool active() const { return budget >= 0 && !start_ids.empty() && !end_ids.empty(); }
};

// Fills prompt_in_block / prompt_block_tokens from the prompt's token ids.
void summarize_prompt(ReasoningBudget& budget, std::span<const int32_t> prompt_ids);

// The token the next step must produce, given the tokens generated so far, or nullopt when the
// budget does not constrain it (no budget, no open block, or budget not yet spent).
std::optional<int32_t> forced_reasoning_token(const ReasoningBudget& budget, std::span<const int32_t> output_ids);

}  // namespace fp4serve::kernels
