// thinking_token_budget's rule (kernels/reasoning_budget.h): which token, if any, the next step must
// produce, from the prompt's summary and the output so far.
#include "kernels/reasoning_budget.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace fp4serve::kernels {
namespace {

constexpr int32_t kStart = 100;  // "<think>"
constexpr int32_t kEnd = 101;    // "</think>"
constexpr int32_t kNewline = 7;

ReasoningBudget qwen_budget(int64_t budget, const std::vector<int32_t>& prompt) {
  ReasoningBudget b;
  b.budget = budget;
  b.start_ids = {kStart};
  b.end_ids = {kEnd};
  summarize_prompt(b, prompt);
  return b;
}

// A Qwen3.6 generation prompt with thinking on ends "<think>\n".
const std::vector<int32_t> kThinkingPrompt{1, 2, kStart, kNewline};
// With thinking off the template closes the block in the prompt.
const std::vector<int32_t> kClosedPrompt{1, 2, kStart, kNewline, kEnd, kNewline};

TEST(ReasoningBudget, PromptSummary) {
  ReasoningBudget b = qwen_budget(4, kThinkingPrompt);
  EXPECT_TRUE(b.prompt_in_block);
  EXPECT_EQ(b.prompt_block_tokens, 1);  // the "\n" after <think>
  b = qwen_budget(4, kClosedPrompt);
  EXPECT_FALSE(b.prompt_in_block);
  b = qwen_budget(4, {1, 2, 3});
  EXPECT_FALSE(b.prompt_in_block);
}

TEST(ReasoningBudget, ForcesTheEndOnceTheBlockHoldsBudgetTokens) {
  const ReasoningBudget b = qwen_budget(4, kThinkingPrompt);
  // The prompt's "\n" counts: three output tokens fill the budget of four.
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{5, 6}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{5, 6, 8}), kEnd);
  // Once "</think>" is out, the answer is free.
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{5, 6, 8, kEnd}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{5, 6, 8, kEnd, 9, 9, 9, 9, 9}), std::nullopt);
  // A model that closes the block itself is never forced.
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{5, kEnd, 9, 9, 9, 9}), std::nullopt);
}

TEST(ReasoningBudget, ZeroBudgetClosesAtOnce) {
  const ReasoningBudget b = qwen_budget(0, kThinkingPrompt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{}), kEnd);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{kEnd}), std::nullopt);
}

TEST(ReasoningBudget, NoOpenBlockNoBudgetNoForcing) {
  EXPECT_EQ(forced_reasoning_token(qwen_budget(0, kClosedPrompt), std::vector<int32_t>{5, 6}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(qwen_budget(-1, kThinkingPrompt), std::vector<int32_t>{5, 6, 7, 8}), std::nullopt);
  ReasoningBudget no_markers = qwen_budget(0, kThinkingPrompt);
  no_markers.end_ids.clear();
  EXPECT_EQ(forced_reasoning_token(no_markers, std::vector<int32_t>{}), std::nullopt);
}

TEST(ReasoningBudget, ABlockOpenedInTheOutputGetsTheBudget) {
  // Older templates let the model write "<think>" itself; the block counts from after it.
  const ReasoningBudget b = qwen_budget(2, {1, 2});
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{kStart, 5}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{kStart, 5, 6}), kEnd);
  // After a block closed, a new one gets the budget afresh.
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{kStart, 5, 6, kEnd, 9, kStart, 5}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{kStart, 5, 6, kEnd, 9, kStart, 5, 6}), kEnd);
}

TEST(ReasoningBudget, MultiTokenEndMarkerIsForcedTokenByToken) {
  ReasoningBudget b;
  b.budget = 1;
  b.start_ids = {40, 41};
  b.end_ids = {50, 51, 52};
  summarize_prompt(b, std::vector<int32_t>{1, 40, 41});
  EXPECT_FALSE(b.prompt_block_tokens);  // the block opens at the prompt's very end
  EXPECT_TRUE(b.prompt_in_block);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{}), std::nullopt);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{9}), 50);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{9, 50}), 51);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{9, 50, 51}), 52);
  EXPECT_EQ(forced_reasoning_token(b, std::vector<int32_t>{9, 50, 51, 52}), std::nullopt);
}

}  // namespace
}  // namespace fp4serve::kernels
