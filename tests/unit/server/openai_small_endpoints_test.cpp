// /v1/models, /tokenize, /detokenize, /version (docs/vllm-surface.md §1.6).
#include <gtest/gtest.h>

#include "server/openai/response_common.h"
#include "server/openai/small_endpoints.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

TEST(Models, CardShape) {
  const Json out = models_list_json({ModelCardInfo{"qwen3.6", "Qwen/Qwen3.6-35B-A3B", std::nullopt, 262144, 1730000000}});
  Json card = out["data"][0];
  const std::string perm_id = card["permission"][0]["id"].get<std::string>();
  EXPECT_EQ(perm_id.rfind("modelperm-", 0), 0u);
  card["permission"][0]["id"] = "modelperm-x";
  EXPECT_EQ(dump_json(out["object"]), "\"list\"");
  EXPECT_EQ(dump_json(card),
            R"({"id":"qwen3.6","object":"model","created":1730000000,"owned_by":"vllm","root":"Qwen/Qwen3.6-35B-A3B","parent":null,"max_model_len":262144,"permission":[{"id":"modelperm-x","object":"model_permission","created":1730000000,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]})");
}

TEST(Version, Shape) { EXPECT_EQ(dump_json(version_json("0.11.0")), R"({"version":"0.11.0"})"); }

TEST(Tokenize, CompletionForm) {
  const TokenizeRequest r = parse_tokenize_request(std::string_view(R"({"prompt": "hi", "return_token_strs": true})"), test_limits());
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_TRUE(r.return_token_strs);
  EXPECT_EQ(dump_json(tokenize_response_json({1, 2}, 4096, std::vector<std::string>{"a", "b"})),
            R"({"count":2,"max_model_len":4096,"tokens":[1,2],"token_strs":["a","b"]})");
  EXPECT_EQ(dump_json(tokenize_response_json({1}, 4096, std::nullopt)),
            R"({"count":1,"max_model_len":4096,"tokens":[1],"token_strs":null})");
}

TEST(Tokenize, ChatForm) {
  const TokenizeRequest r = parse_tokenize_request(
      std::string_view(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false}})"),
      test_limits());
  EXPECT_TRUE(r.chat);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_EQ(r.messages[0]["content"], "hi");
  EXPECT_EQ(r.chat_template_kwargs, Json::parse(R"({"enable_thinking": false})"));
}

TEST(Tokenize, Errors) {
  ApiError e = expect_api_error([] { parse_tokenize_request(std::string_view(R"({})"), test_limits()); });
  EXPECT_EQ(e.message.rfind("2 validation errors:", 0), 0u) << e.message;
  e = expect_api_error([] { parse_tokenize_request(std::string_view(R"({"prompt": "x", "model": "m"})"), test_limits()); });
  EXPECT_EQ(e.status, 404);
  e = expect_api_error([] { tokenize_response_json(std::vector<int32_t>(11, 1), 10, std::nullopt); });
  EXPECT_EQ(e.param, "input_tokens");
  EXPECT_NE(e.message.find("You passed 11 input tokens and requested 0 output tokens."), std::string::npos);
}

TEST(Detokenize, RequestAndResponse) {
  const DetokenizeRequest r = parse_detokenize_request(std::string_view(R"({"tokens": [1, 2, 3]})"), test_limits());
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(dump_json(detokenize_response_json("abc")), R"({"prompt":"abc"})");
  ApiError e = expect_api_error([] { parse_detokenize_request(std::string_view(R"({})"), test_limits()); });
  EXPECT_EQ(e.param, "body.tokens");
  e = expect_api_error([] { parse_detokenize_request(std::string_view(R"({"tokens": [999999]})"), test_limits()); });
  EXPECT_EQ(e.message, "Token id 999999 is out of vocabulary");
  e = expect_api_error([] { parse_detokenize_request(std::string_view(R"({"tokens": ["a"]})"), test_limits()); });
  EXPECT_EQ(e.param, "body.tokens.0");
}

}  // namespace
}  // namespace fp4serve::server::openai
