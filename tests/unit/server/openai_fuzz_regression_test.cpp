// Request bodies the fuzz targets (fuzz/openai_request_fuzz.cpp) found mishandled, each answered
// now with a clear 400. Their reproducers are in fuzz/corpus/openai/regress-*.
#include <gtest/gtest.h>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "server/openai/small_endpoints.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

// A number literal past double's range (1e309) used to escape the parsers as nlohmann's
// out_of_range exception (a 500 from the HTTP layer); Python's json reads it as inf. It is refused
// as malformed JSON, located at the literal, on every endpoint.
TEST(HostileBodies, NumberPastDoubleRangeIsMalformedJson) {
  const std::string body = R"({"prompt": "x", "temperature": 1e309})";
  const std::string where = "body." + std::to_string(body.find("1e309"));
  const ApiError e = expect_api_error([&] { parse_completion_request(body, test_limits()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, where);
  EXPECT_EQ(e.message, "1 validation error:\n  {'type': 'json_invalid', 'loc': '" + where +
                           "', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {'error': 'Out of range "
                           "float values are not JSON compliant'}}");

  for (const std::string text : {R"({"messages": [{"role": "user", "content": "x"}], "extra": [-1e400]})",
                                 R"({"prompt": "x", "n": 1E+999})"}) {
    const auto chat = expect_api_error([&] { parse_chat_request(text, test_limits()); });
    EXPECT_EQ(chat.status, 400);
    EXPECT_NE(chat.message.find("'type': 'json_invalid'"), std::string::npos) << chat.message;
    const auto tokenize = expect_api_error([&] { parse_tokenize_request(text, test_limits()); });
    EXPECT_NE(tokenize.message.find("Out of range float values"), std::string::npos) << tokenize.message;
    const auto detokenize = expect_api_error([&] { parse_detokenize_request(text, test_limits()); });
    EXPECT_NE(detokenize.message.find("Out of range float values"), std::string::npos) << detokenize.message;
  }
}

// The same literal inside a tool call's JSON-string arguments: the arguments' decode error, not the
// catch-all "Invalid request body".
TEST(HostileBodies, ToolCallArgumentsPastDoubleRange) {
  const std::string body =
      R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1e999}"}}]}]})";
  const ApiError e = expect_api_error([&] { parse_chat_request(body, test_limits()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message, "Out of range float values are not JSON compliant: line 1 column 7 (char 6)");
}

// A falsy prompt_embeds ({}, "", 0) without a prompt passed every check and parsed into a request
// with no prompt at all, which the route never answered (it waits for every prompt to finish).
// prompt_embeds is now typed as vLLM's bytes | list[bytes] | None and refused whenever set.
TEST(HostileBodies, FalsyPromptEmbedsWithoutPromptIsRefused) {
  ApiError e = expect_api_error([] { parse_completion_request(std::string(R"({"prompt_embeds": {}})"), test_limits()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message,
            "2 validation errors:\n  {'type': 'bytes_type', 'loc': 'body.prompt_embeds', 'msg': 'Input should be a valid "
            "bytes', 'input': '<dict of 0 items>'}\n  {'type': 'list_type', 'loc': 'body.prompt_embeds', 'msg': 'Input "
            "should be a valid list', 'input': '<dict of 0 items>'}");
  e = expect_api_error([] { parse_completion_request(std::string(R"({"prompt_embeds": [1]})"), test_limits()); });
  EXPECT_NE(e.message.find("'loc': 'body.prompt_embeds.0', 'msg': 'Input should be a valid bytes'"), std::string::npos)
      << e.message;
  for (const std::string body : {R"({"prompt_embeds": ""})", R"({"prompt_embeds": "AAAA"})", R"({"prompt": "x", "prompt_embeds": ""})"}) {
    e = expect_api_error([&] { parse_completion_request(body, test_limits()); });
    EXPECT_EQ(e.param, "prompt_embeds") << body << ": " << e.message;
  }
  EXPECT_EQ(parse_completion_request(std::string(R"({"prompt": "x", "prompt_embeds": null})"), test_limits()).prompts.size(), 1u);
}

}  // namespace
}  // namespace fp4serve::server::openai
