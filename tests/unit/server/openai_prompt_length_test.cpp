// Length validation and max_tokens resolution (docs/vllm-surface.md §1.5).
#include <gtest/gtest.h>

#include "server/openai/prompt_length.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;

TEST(PromptLength, TooLongPromptMessageAndParam) {
  std::vector<int32_t> ids(4081, 1);
  const ApiError e = expect_api_error([&] { apply_prompt_length_rules(ids, 16, 4096); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_EQ(e.param, "input_tokens");
  EXPECT_EQ(e.message,
            "You passed 4081 input tokens and requested 16 output tokens. However, the model's context length is "
            "only 4096 tokens, resulting in a maximum input length of 4080 tokens. Please reduce the length of the "
            "input prompt. (parameter=input_tokens, value=4081)");
}

TEST(PromptLength, ExactFitIsAccepted) {
  std::vector<int32_t> ids(4080, 1);
  EXPECT_NO_THROW(apply_prompt_length_rules(ids, 16, 4096));
  std::vector<int32_t> full(4096, 1);
  EXPECT_NO_THROW(apply_prompt_length_rules(full, 0, 4096));  // chat without max_tokens
  full.push_back(1);
  EXPECT_THROW(apply_prompt_length_rules(full, 0, 4096), ApiException);
}

TEST(PromptLength, OutputLongerThanContext) {
  const ApiError e = expect_api_error([] { check_max_output_tokens(5000, "max_tokens", 4096); });
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.message,
            "max_tokens=5000cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output "
            "tokens. (parameter=max_tokens, value=5000)");
  EXPECT_NO_THROW(check_max_output_tokens(4096, "max_completion_tokens", 4096));
}

TEST(PromptLength, Truncation) {
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  apply_prompt_length_rules(ids, 16, 4096, 3);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 4, 5}));  // left: keep the last N
  ids = {1, 2, 3, 4, 5};
  apply_prompt_length_rules(ids, 16, 4096, 2, std::string("right"));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  ids = std::vector<int32_t>(10, 7);
  apply_prompt_length_rules(ids, 2, 8, -1);  // -1: the maximum input length
  EXPECT_EQ(ids.size(), 6u);
  const ApiError e = expect_api_error([] {
    std::vector<int32_t> v = {1};
    apply_prompt_length_rules(v, 16, 64, 100);
  });
  EXPECT_EQ(e.param, "truncate_prompt_tokens");
}

TEST(PromptLength, ResolveMaxTokens) {
  EXPECT_EQ(resolve_max_tokens(4096, 16, 100, std::nullopt), 16);
  EXPECT_EQ(resolve_max_tokens(4096, 5000, 100, std::nullopt), 3996);  // silently clamped
  EXPECT_EQ(resolve_max_tokens(4096, std::nullopt, 100, std::nullopt), 3996);  // chat: fill the context
  EXPECT_EQ(resolve_max_tokens(4096, std::nullopt, 100, 2048), 2048);          // generation_config max_new_tokens
  EXPECT_EQ(resolve_max_tokens(4096, 3000, 100, 2048), 3000);                   // request wins over it
  EXPECT_EQ(resolve_max_tokens(4096, 3000, 100, std::nullopt, 1000), 1000);    // override caps
  const ApiError e = expect_api_error([] { resolve_max_tokens(10, 1, 11, std::nullopt); });
  EXPECT_EQ(e.message, "Input length (11) exceeds model's maximum context length (10).");
}

TEST(PromptLength, TokenIdChecks) {
  EXPECT_EQ(expect_api_error([] { check_prompt_token_ids({}, 10); }).message, "The decoder prompt cannot be empty");
  EXPECT_EQ(expect_api_error([] { check_prompt_token_ids({1, 12, 3}, 10); }).message, "Token id 12 is out of vocabulary");
  EXPECT_NO_THROW(check_prompt_token_ids({0, 9}, 10));
}

}  // namespace
}  // namespace fp4serve::server::openai
