// The vLLM request fields behind per-request token filters and the reasoning budget --
// allowed_token_ids, logprob_token_ids, thinking_token_budget -- and suffix: parsing, vLLM's 400s
// word for word, and what reaches the engine's SamplingParams.
#include <gtest/gtest.h>

#include <limits>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

ServerLimits reasoning_limits() {
  ServerLimits limits = test_limits();
  limits.sampling.reasoning_enabled = true;
  limits.sampling.valid_vocab_size = 248077;
  return limits;
}

engine::SamplingParams chat_params(const std::string& body, const ServerLimits& limits = reasoning_limits()) {
  const ChatRequest r = parse_chat_request(std::string_view(body), limits);
  return to_sampling_params(r, 16, {}, limits);
}

engine::SamplingParams completion_params(const std::string& body, const ServerLimits& limits = reasoning_limits()) {
  const CompletionRequest r = parse_completion_request(std::string_view(body), limits);
  return to_sampling_params(r, 16, {}, limits);
}

ApiError chat_error(const std::string& body, const ServerLimits& limits = reasoning_limits()) {
  return expect_api_error([&] { chat_params(body, limits); });
}

ApiError completion_error(const std::string& body, const ServerLimits& limits = reasoning_limits()) {
  return expect_api_error([&] { completion_params(body, limits); });
}

const char* kMessages = R"("messages": [{"role": "user", "content": "hi"}])";

std::string chat(const std::string& fields) { return std::string("{") + kMessages + ", " + fields + "}"; }

TEST(ThinkingTokenBudget, ReachesTheEngineAndMinusOneMeansUnset) {
  EXPECT_EQ(chat_params(chat(R"("thinking_token_budget": 64)")).thinking_token_budget, 64);
  EXPECT_FALSE(chat_params(chat(R"("thinking_token_budget": -1)")).thinking_token_budget);
  EXPECT_FALSE(chat_params(chat(R"("thinking_token_budget": null)")).thinking_token_budget);
  EXPECT_EQ(completion_params(R"({"prompt": "x", "thinking_token_budget": 0})").thinking_token_budget, 0);
}

TEST(ThinkingTokenBudget, OnlyIntegersPassVllmsValidator) {
  // validate_thinking_token_budget sees the raw value: a float, bool or numeric string is refused
  // (a plain int field would have coerced them), reported by pydantic at the field.
  ApiError e = chat_error(chat(R"("thinking_token_budget": 1.5)"));
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_EQ(e.param, "thinking_token_budget");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'value_error', 'loc': 'body.thinking_token_budget', 'msg': 'Value error, "
            "`thinking_token_budget` must be a non-negative integer or -1 for unlimited. "
            "(parameter=thinking_token_budget, value=1.5)', 'input': '1.5', 'ctx': {'error': "
            "VLLMValidationError('`thinking_token_budget` must be a non-negative integer or -1 for unlimited.')}}");
  EXPECT_NE(chat_error(chat(R"("thinking_token_budget": true)")).message.find("value=True)"), std::string::npos);
  EXPECT_NE(chat_error(chat(R"("thinking_token_budget": "8")")).message.find("value=8)"), std::string::npos);
  e = completion_error(R"({"prompt": "x", "thinking_token_budget": -2})");
  EXPECT_EQ(e.param, "thinking_token_budget");
  EXPECT_NE(e.message.find("value=-2)"), std::string::npos) << e.message;
}

TEST(ThinkingTokenBudget, NeedsAReasoningParser) {
  const ApiError e = chat_error(chat(R"("thinking_token_budget": 8)"), test_limits());
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_FALSE(e.param);
  EXPECT_EQ(e.message,
            "thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser "
            "and/or --reasoning-config to use thinking_token_budget.");
  // -1 is no budget at all: accepted anywhere.
  EXPECT_NO_THROW(chat_params(chat(R"("thinking_token_budget": -1)"), test_limits()));
}

TEST(AllowedTokenIds, ReachTheEngine) {
  const engine::SamplingParams p = chat_params(chat(R"("allowed_token_ids": [5, 9])"));
  ASSERT_TRUE(p.allowed_token_ids);
  EXPECT_EQ(*p.allowed_token_ids, (std::vector<int64_t>{5, 9}));
  EXPECT_FALSE(chat_params(chat(R"("allowed_token_ids": null)")).allowed_token_ids);
}

TEST(AllowedTokenIds, VllmsRefusals) {
  ApiError e = completion_error(R"({"prompt": "x", "allowed_token_ids": []})");
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_EQ(e.param, "allowed_token_ids");
  EXPECT_EQ(e.message, "allowed_token_ids is not None and empty! (parameter=allowed_token_ids, value=[])");
  e = chat_error(chat(R"("allowed_token_ids": [1, 248320, -4])"));
  EXPECT_EQ(e.body(),
            R"x({"error":{"message":"allowed_token_ids contains out-of-vocab token id! (parameter=allowed_token_ids, )x"
            R"x(value=[248320, -4])","type":"BadRequestError","param":"allowed_token_ids","code":400}})x");
  e = chat_error(chat(R"("allowed_token_ids": [1, "two"])"));
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_EQ(e.param, "body.allowed_token_ids.1");
}

TEST(LogprobTokenIds, ReplaceTheTopNInTheEngineParams) {
  engine::SamplingParams p = chat_params(chat(R"("logprobs": true, "top_logprobs": 5, "logprob_token_ids": [3, 4])"));
  EXPECT_FALSE(p.logprobs) << "vLLM passes logprobs=None when logprob_token_ids are named";
  EXPECT_EQ(*p.logprob_token_ids, (std::vector<int64_t>{3, 4}));
  p = completion_params(R"({"prompt": "x", "logprobs": 7, "logprob_token_ids": [3]})");
  EXPECT_FALSE(p.logprobs);
  EXPECT_EQ(*p.logprob_token_ids, (std::vector<int64_t>{3}));
  // The responses then list every entry of each token's dict.
  const CompletionRequest r = parse_completion_request(std::string(R"({"prompt": "x", "logprobs": 1, "logprob_token_ids": [3]})"),
                                                       reasoning_limits());
  EXPECT_EQ(response_top_logprobs(r.common, 1), std::numeric_limits<int64_t>::max());
  const CompletionRequest plain = parse_completion_request(std::string(R"({"prompt": "x", "logprobs": 1})"), reasoning_limits());
  EXPECT_EQ(response_top_logprobs(plain.common, 1), 1);
}

TEST(LogprobTokenIds, VllmsRefusals) {
  // The "before" validators (existing) run first ...
  ApiError e = chat_error(chat(R"("logprob_token_ids": [3])"));
  EXPECT_NE(e.message.find("when using `logprob_token_ids`, `logprobs` must be set to true."), std::string::npos);
  e = completion_error(R"({"prompt": "x", "logprob_token_ids": []})");
  EXPECT_NE(e.message.find("`logprob_token_ids` must not be an empty list."), std::string::npos);
  // ... then SamplingParams._validate_logprobs.
  e = completion_error(R"({"prompt": "x", "logprobs": 1, "logprob_token_ids": [7, 248320]})");
  EXPECT_EQ(e.param, "logprob_token_ids");
  EXPECT_EQ(e.message,
            "token_id(s) [248320] in logprob_token_ids contain out-of-vocab token ids. Vocabulary size: 248320 "
            "(parameter=logprob_token_ids, value=[248320])");
  std::string many = "[";
  for (int i = 0; i < 129; ++i) many += (i ? ", " : "") + std::to_string(i);
  e = chat_error(chat(R"("logprobs": true, "logprob_token_ids": )" + many + "]"));
  EXPECT_EQ(e.message,
            "Requested logprob_token_ids of length 129, which is greater than max allowed: 128 "
            "(parameter=logprob_token_ids, value=129)");
}

TEST(Suffix, RefusedAsVllmRefusesIt) {
  // vLLM's renderer: create_error_response("suffix is not currently supported"), for every model.
  const ApiError e = expect_api_error([] {
    parse_completion_request(std::string(R"({"prompt": "def f(", "suffix": "return x"})"), test_limits());
  });
  EXPECT_EQ(e.body(),
            R"({"error":{"message":"suffix is not currently supported","type":"BadRequestError","param":null,"code":400}})");
  EXPECT_NO_THROW(parse_completion_request(std::string(R"({"prompt": "x", "suffix": null})"), test_limits()));
}

}  // namespace
}  // namespace fp4serve::server::openai
