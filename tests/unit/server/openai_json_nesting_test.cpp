// Client JSON nesting (issue 22): bodies nested past kMaxJsonNestingDepth get a 400 from every
// request parser before anything recursive runs, wherever the nesting sits. Depths 1k, 100k and
// 10M: the last is a 20 MB body, under the 32 MB body limit, that overflowed the stack before.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/openai/chat_request.h"
#include "server/openai/client_json.h"
#include "server/openai/completion_request.h"
#include "server/openai/small_endpoints.h"
#include "openai_test_support.h"

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(std::size_t depth) {
  std::string out;
  out.reserve(depth * 7 + 1);
  for (std::size_t i = 0; i < depth; ++i) out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

// A valid body with "@" where the nested value goes.
struct Site {
  const char* endpoint;
  const char* body;
};

const std::vector<Site>& sites() {
  static const std::vector<Site> kSites = {
      {"chat", "@"},
      {"chat", R"({"model": "qwen3.6", "messages": [{"role": "user", "content": "hi"}], "extra": @})"},
      {"chat", R"({"messages": @})"},
      {"chat", R"({"messages": [@]})"},
      {"chat", R"({"messages": [{"role": "user", "content": @}]})"},
      {"chat", R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "x": @}]}]})"},
      {"chat", R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": @}}]}]})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": @}}]})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": @})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"k": @}})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"1": @}})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "stop": @})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": @}})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "response_format": @})"},
      {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "temperature": @})"},
      {"completion", "@"},
      {"completion", R"({"prompt": @})"},
      {"completion", R"({"prompt": [@]})"},
      {"completion", R"({"prompt": "hi", "logit_bias": @})"},
      {"completion", R"({"prompt": "hi", "stop": [@]})"},
      {"completion", R"({"prompt": "hi", "max_tokens": @})"},
      {"completion", R"({"prompt": "hi", "kv_transfer_params": @})"},
      {"tokenize", "@"},
      {"tokenize", R"({"prompt": @})"},
      {"tokenize", R"({"messages": [{"role": "user", "content": @}]})"},
      {"tokenize", R"({"messages": [{"role": "user", "content": "hi"}], "tools": @})"},
      {"detokenize", "@"},
      {"detokenize", R"({"tokens": @})"},
      {"detokenize", R"({"tokens": [1, 2, @]})"},
  };
  return kSites;
}

void parse(const std::string& endpoint, const std::string& body) {
  const ServerLimits limits = test_limits();
  if (endpoint == "chat") {
    parse_chat_request(std::string_view(body), limits);
  } else if (endpoint == "completion") {
    parse_completion_request(std::string_view(body), limits);
  } else if (endpoint == "tokenize") {
    parse_tokenize_request(std::string_view(body), limits);
  } else {
    parse_detokenize_request(std::string_view(body), limits);
  }
}

std::string place(const Site& site, const std::string& value) {
  std::string body = site.body;
  body.replace(body.find('@'), 1, value);
  return body;
}

TEST(JsonNesting, ScanFindsTheFirstBracketPastTheLimit) {
  EXPECT_EQ(find_excess_nesting(nested_arrays(512)), std::nullopt);
  EXPECT_EQ(find_excess_nesting(nested_arrays(513)), std::optional<std::size_t>(512));
  EXPECT_EQ(find_excess_nesting(nested_objects(513)), std::optional<std::size_t>(512 * 5));
  // Brackets inside strings (escaped quotes included) are text, not nesting.
  const std::string in_string = "[\"" + std::string(2000, '[') + "\\\"" + std::string(2000, '{') + "\"]";
  EXPECT_EQ(find_excess_nesting(in_string), std::nullopt);
  // Closing brackets bring the depth back down.
  std::string siblings;
  for (int i = 0; i < 100; ++i) siblings += nested_arrays(400);
  EXPECT_EQ(find_excess_nesting("[" + siblings + "]"), std::nullopt);
  // Unbalanced closers never make the depth negative.
  EXPECT_EQ(find_excess_nesting(std::string(1000, ']') + nested_arrays(512)), std::nullopt);
}

TEST(JsonNesting, EveryEndpointAndFieldRefusesDeepNestingWith400) {
  for (std::size_t depth : {std::size_t{1000}, std::size_t{100'000}, std::size_t{10'000'000}}) {
    const std::string arrays = nested_arrays(depth);
    const std::string objects = depth <= 100'000 ? nested_objects(depth) : std::string();
    for (const Site& site : sites()) {
      for (const std::string* value : {&arrays, &objects}) {
        if (value->empty()) continue;
        const ApiError e = expect_api_error([&] { parse(site.endpoint, place(site, *value)); });
        EXPECT_EQ(e.status, 400) << site.endpoint << " " << site.body << " depth " << depth;
        EXPECT_EQ(e.type, "Bad Request");
        EXPECT_NE(e.message.find("There was an error parsing the body: JSON nested deeper than 512 levels"),
                  std::string::npos)
            << e.message;
      }
    }
  }
}

TEST(JsonNesting, NestingAtTheLimitIsParsedNormally) {
  // 512 levels in total pass the scan; the parsers then answer as they would for any value.
  const std::string deep = nested_arrays(510);
  const ChatRequest chat = parse_chat_request(
      std::string_view(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"k": )" + deep + "}}"),
      test_limits());
  EXPECT_TRUE(chat.chat_template_kwargs["k"].is_array());
  const ApiError e = expect_api_error([&] { parse("completion", R"({"prompt": "hi", "stop": )" + deep + "}"); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message.find("nested deeper"), std::string::npos) << e.message;
}

TEST(JsonNesting, ToolCallArgumentStringsAreBoundedToo) {
  // Arguments sent as a JSON string are parsed again: the same bound applies to that text.
  nlohmann::ordered_json body = {
      {"messages",
       {{{"role", "assistant"},
         {"content", ""},
         {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", nested_arrays(100'000)}}}}}}}}}};
  const ApiError e = expect_api_error([&] { parse_chat_request(body, test_limits()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("Invalid tool call arguments: JSON nested deeper than 512 levels"), std::string::npos)
      << e.message;
}

}  // namespace
}  // namespace fp4serve::server::openai
