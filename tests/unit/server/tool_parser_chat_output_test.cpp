// Reasoning parser + qwen3_coder tool parser chained as vLLM's chat serving does; streaming at
// every split point equals the non-streaming result.
#include "server/openai/tool_parser_chat_output.h"

#include <gtest/gtest.h>

#include <map>

namespace fp4serve::server::openai {
namespace {

using json = nlohmann::ordered_json;

const char* kCall =
    "<tool_call>\n<function=bash>\n<parameter=command>\nls -l\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n"
    "</function>\n</tool_call>";
const char* kArgs = R"({"command": "ls -l", "timeout": 30})";

ChatOutputOptions options(bool reasoning, bool tools, bool thinking_closed = false) {
  ChatOutputOptions o;
  o.reasoning_parser = reasoning;
  o.reasoning.prompt_ends_reasoning = thinking_closed;
  o.tool_parser = tools;
  o.tools = json::parse(R"([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
    "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}}}}])");
  return o;
}

struct Case {
  const char* name;
  std::string text;
  ChatOutputOptions options;
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<std::string> arguments;  // of each call to bash
};

std::vector<Case> cases() {
  return {
      {"implicit_reasoning_end", std::string("I need the file list.\n\n") + kCall, options(true, true),
       "I need the file list.\n\n", std::nullopt, {kArgs}},
      {"think_then_text_then_call", std::string("plan</think>\n\nLet me look.\n") + kCall + "\n", options(true, true),
       "plan", "\n\nLet me look.\n", {kArgs}},
      {"two_calls", std::string("p</think>") + kCall + "\n" + kCall, options(true, true), "p", std::nullopt,
       {kArgs, kArgs}},
      {"thinking_off", "Hello there.", options(true, true, true), std::nullopt, "Hello there.", {}},
      {"thinking_off_with_call", std::string("On it.") + kCall, options(true, true, true), std::nullopt, "On it.",
       {kArgs}},
      {"no_parsers", std::string("x</think>y") + kCall, options(false, false), std::nullopt,
       std::string("x</think>y") + kCall, {}},
      {"tools_off", std::string("r</think>") + kCall, options(true, false), "r", std::string(kCall), {}},
      {"truncated_in_reasoning", "still thinking <tool_ca", options(true, true), "still thinking <tool_ca",
       std::nullopt, {}},
      {"invalid_call_keeps_content", "r</think>see <tool_call>\n<function={{x}}>\n</function>\n</tool_call>",
       options(true, true), "r", "see <tool_call>\n<function={{x}}>\n</function>\n</tool_call>", {}},
  };
}

TEST(ChatOutputParser, NonStreaming) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto out = parse_chat_output(c.text, c.options);
    EXPECT_EQ(out.reasoning, c.reasoning);
    EXPECT_EQ(out.content, c.content);
    ASSERT_EQ(out.tool_calls.size(), c.arguments.size());
    EXPECT_EQ(out.tools_called, !c.arguments.empty());
    for (std::size_t i = 0; i < c.arguments.size(); ++i) {
      EXPECT_EQ(out.tool_calls[i].name, "bash");
      EXPECT_EQ(out.tool_calls[i].arguments, c.arguments[i]);
    }
  }
}

TEST(ChatOutputParser, StreamingEqualsNonStreamingAtEverySplit) {
  for (const auto& c : cases()) {
    for (std::size_t i = 0; i <= c.text.size(); ++i) {
      SCOPED_TRACE(std::string(c.name) + " split at " + std::to_string(i));
      ChatOutputStreamParser parser(c.options);
      std::string reasoning, content;
      std::map<int, std::string> args;
      std::map<int, std::string> names;
      for (const auto& d : {parser.feed(c.text.substr(0, i)), parser.feed(c.text.substr(i)), parser.finish()}) {
        reasoning += d.reasoning;
        content += d.content;
        for (const auto& tc : d.tool_calls) {
          if (tc.name) names[tc.index] = *tc.name;
          args[tc.index] += tc.arguments;
        }
      }
      EXPECT_EQ(reasoning, c.reasoning.value_or(""));
      EXPECT_EQ(content, c.content.value_or(""));
      ASSERT_EQ(args.size(), c.arguments.size());
      for (std::size_t k = 0; k < c.arguments.size(); ++k) {
        EXPECT_EQ(names[static_cast<int>(k)], "bash");
        EXPECT_EQ(args[static_cast<int>(k)], c.arguments[k]);
      }
      EXPECT_EQ(parser.tools_called(), !c.arguments.empty());
    }
  }
}

}  // namespace
}  // namespace fp4serve::server::openai
