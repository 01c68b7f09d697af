// A forced tool_choice's output -> tool calls, non-streamed and streamed, with and without the
// qwen3 reasoning parser in front (tool_parser_chat_output.h).
#include <gtest/gtest.h>

#include "server/openai/forced_tool_calls.h"
#include "server/openai/tool_parser_chat_output.h"

namespace fp4serve::server::openai {
namespace {

const char* kRequiredOutput =
    R"([{"name": "get_weather", "parameters": {"city": "Paris", "days": 2.0}}, {"name": "f", "parameters": {"q": "é"}}])";

TEST(ForcedToolCalls, RequiredMakesOneCallPerElement) {
  const auto calls = parse_forced_tool_calls(ToolChoice::kRequired, "", kRequiredOutput);
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ((*calls)[0].arguments, R"({"city": "Paris", "days": 2.0})");  // json.dumps
  EXPECT_EQ((*calls)[1].arguments, R"({"q": "é"})");                      // ensure_ascii=False
  EXPECT_EQ((*calls)[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_NE((*calls)[0].id, (*calls)[1].id);
  // Cut by max_tokens, or not an array of calls: no calls (the text stays content).
  EXPECT_FALSE(parse_forced_tool_calls(ToolChoice::kRequired, "", R"([{"name": "f", "parameters": {"q": )"));
  EXPECT_FALSE(parse_forced_tool_calls(ToolChoice::kRequired, "", R"({"name": "f"})"));
  EXPECT_FALSE(parse_forced_tool_calls(ToolChoice::kRequired, "", R"([{"parameters": {}}])"));
}

TEST(ForcedToolCalls, NamedTakesTheContentAsArguments) {
  const auto calls = parse_forced_tool_calls(ToolChoice::kNamed, "get_weather", R"({"city":"Paris"})");
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ((*calls)[0].arguments, R"({"city":"Paris"})");
}

ChatOutputOptions forced(ToolChoice choice, const std::string& name = "", bool reasoning = false) {
  ChatOutputOptions o;
  o.forced = choice;
  o.forced_function = name;
  o.reasoning_parser = reasoning;
  return o;
}

TEST(ForcedToolCalls, ChatOutputAfterReasoning) {
  const ChatOutput out = parse_chat_output(std::string("thinking</think>\n\n") + kRequiredOutput,
                                           forced(ToolChoice::kRequired, "", true));
  EXPECT_EQ(out.reasoning, "thinking");
  EXPECT_EQ(out.content, "");
  EXPECT_TRUE(out.tools_called);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  // Reasoning that never ended: no content, no call.
  const ChatOutput open = parse_chat_output("still thinking", forced(ToolChoice::kNamed, "f", true));
  EXPECT_TRUE(open.tool_calls.empty());
}

// Feeds `text` in pieces of `step` bytes and concatenates what comes out.
std::vector<ToolCallDelta> stream(const ChatOutputOptions& options, const std::string& text, std::size_t step,
                                  std::string* reasoning = nullptr, std::string* content = nullptr) {
  ChatOutputStreamParser parser(options);
  std::vector<ToolCallDelta> calls;
  auto take = [&](ChatOutputDelta d) {
    if (reasoning) *reasoning += d.reasoning;
    if (content) *content += d.content;
    calls.insert(calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  for (std::size_t i = 0; i < text.size(); i += step) take(parser.feed(std::string_view(text).substr(i, step)));
  take(parser.finish());
  return calls;
}

TEST(ForcedToolCalls, RequiredStreamsEachCallWhenItsElementCloses) {
  // Strings holding brackets, quotes and escapes must not confuse the element scanner.
  const std::string text = R"( [ {"name": "a", "parameters": {"s": "}]\"{["}} , {"name": "b", "parameters": {}} ] )";
  for (std::size_t step : {1u, 3u, 1000u}) {
    std::string content;
    const auto calls = stream(forced(ToolChoice::kRequired), text, step, nullptr, &content);
    EXPECT_EQ(content, "");
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[0].index, 0);
    EXPECT_EQ(calls[0].name, "a");
    EXPECT_EQ(calls[0].arguments, R"({"s": "}]\"{["})");
    EXPECT_TRUE(calls[0].id);
    EXPECT_EQ(calls[1].index, 1);
    EXPECT_EQ(calls[1].name, "b");
    EXPECT_EQ(calls[1].arguments, "{}");
  }
}

TEST(ForcedToolCalls, NamedStreamsArgumentText) {
  std::string reasoning;
  const auto calls = stream(forced(ToolChoice::kNamed, "get_weather", true), R"(hmm</think>{"city": "Paris"})", 2,
                            &reasoning);
  EXPECT_EQ(reasoning, "hmm");
  ASSERT_FALSE(calls.empty());
  EXPECT_TRUE(calls[0].id);
  EXPECT_EQ(calls[0].name, "get_weather");
  std::string arguments;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].index, 0);
    if (i) EXPECT_FALSE(calls[i].name);
    arguments += calls[i].arguments;
  }
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
}

TEST(ForcedToolCalls, FinishReasons) {
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kRequired, true), "tool_calls");
  EXPECT_EQ(chat_finish_reason("length", ToolChoice::kRequired, false), "length");
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kNamed, true), "stop");
}

}  // namespace
}  // namespace fp4serve::server::openai
