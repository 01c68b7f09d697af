// Qwen3 reasoning parser: vLLM's test cases (tests/reasoning/test_qwen3_reasoning_parser.py),
// streaming == non-streaming for every split of the text, and thinking on/off.
#include "server/openai/reasoning_parser.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace fp4serve::server::openai {
namespace {

using Opt = std::optional<std::string>;

struct Streamed {
  std::string reasoning;
  std::string content;
};

Streamed stream(const std::vector<std::string>& deltas, ReasoningParserOptions options = {}) {
  Qwen3ReasoningParser parser(options);
  Streamed out;
  for (const auto& d : deltas) {
    const auto delta = parser.feed(d);
    out.reasoning += delta.reasoning;
    out.content += delta.content;
  }
  const auto tail = parser.finish();
  out.reasoning += tail.reasoning;
  out.content += tail.content;
  return out;
}

Opt or_none(const std::string& s) { return s.empty() ? Opt{} : Opt{s}; }

const std::string kToolCallBody =
    "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>";

struct Case {
  const char* name;
  std::string output;
  Opt reasoning;
  Opt content;
};

const std::vector<Case>& vllm_cases() {
  static const std::vector<Case> cases = {
      {"without_start_token", "This is a reasoning section</think>This is the rest", "This is a reasoning section",
       "This is the rest"},
      {"without_start_token_complete_reasoning", "This is a reasoning section</think>", "This is a reasoning section",
       std::nullopt},
      {"with_think", "<think>This is a reasoning section</think>This is the rest", "This is a reasoning section",
       "This is the rest"},
      {"without_think", "This is the rest", "This is the rest", std::nullopt},
      {"complete_reasoning", "<think>This is a reasoning section</think>", "This is a reasoning section", std::nullopt},
      {"multiline_reasoning", "<think>This is a reasoning\nsection</think>This is the rest\nThat",
       "This is a reasoning\nsection", "This is the rest\nThat"},
      {"only_open_tag", "<think>This is a reasoning section", "This is a reasoning section", std::nullopt},
      {"truncated_no_start_token", "This is a reasoning section", "This is a reasoning section", std::nullopt},
      {"tool_call_no_think_end", "I need to read the file.\n\n" + kToolCallBody, "I need to read the file.\n\n",
       kToolCallBody},
      {"tool_call_with_think_no_end", "<think>I need to read the file.\n\n" + kToolCallBody,
       "I need to read the file.\n\n", kToolCallBody},
      // Ours, same rules: a bare <tool_call> mention in the reasoning does not end it.
      {"bare_tool_call_mention", "Use <tool_call> tags.</think>ok", "Use <tool_call> tags.", "ok"},
      {"tool_call_then_text_not_function", "a <tool_call>\nhello", "a <tool_call>\nhello", std::nullopt},
      {"function_with_space", "x<tool_call> <function name=\"f\">", "x", "<tool_call> <function name=\"f\">"},
      {"qwen36_typical", "Let me think.\n</think>\n\nThe answer is 4.", "Let me think.\n", "\n\nThe answer is 4."},
      {"lt_in_reasoning", "a < b and c <thinking</think>done", "a < b and c <thinking", "done"},
      {"second_think_after_end", "r</think>c<think>x</think>y", "r", "c<think>x</think>y"},
      {"empty", "", std::nullopt, std::nullopt},
  };
  return cases;
}

TEST(Qwen3ReasoningParser, NonStreamingMatchesVllmCases) {
  for (const auto& c : vllm_cases()) {
    SCOPED_TRACE(c.name);
    const auto split = Qwen3ReasoningParser::extract(c.output);
    EXPECT_EQ(split.reasoning, c.reasoning);
    EXPECT_EQ(split.content, c.content);
  }
}

TEST(Qwen3ReasoningParser, StreamingEqualsNonStreamingAtEverySplitPoint) {
  for (const auto& c : vllm_cases()) {
    for (std::size_t i = 0; i <= c.output.size(); ++i) {
      for (std::size_t j = i; j <= c.output.size(); j += 3) {
        SCOPED_TRACE(std::string(c.name) + " split at " + std::to_string(i) + "," + std::to_string(j));
        const auto s = stream({c.output.substr(0, i), c.output.substr(i, j - i), c.output.substr(j)});
        EXPECT_EQ(or_none(s.reasoning), c.reasoning);
        EXPECT_EQ(or_none(s.content), c.content);
      }
    }
  }
}

TEST(Qwen3ReasoningParser, StreamingCharacterByCharacter) {
  for (const auto& c : vllm_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> chars;
    for (const char ch : c.output) chars.emplace_back(1, ch);
    const auto s = stream(chars);
    EXPECT_EQ(or_none(s.reasoning), c.reasoning);
    EXPECT_EQ(or_none(s.content), c.content);
  }
}

// vLLM's MULTI_TOKEN_DELTA_CASES.
TEST(Qwen3ReasoningParser, MultiTokenDeltas) {
  struct M {
    std::vector<std::string> deltas;
    std::string reasoning;
    Opt content;
  };
  const std::vector<M> cases = {
      {{"<think>This is a reasoning section", "</think>", "This is the rest"}, "This is a reasoning section",
       "This is the rest"},
      {{"reasoning section", "</think>This is the rest"}, "reasoning section", "This is the rest"},
      {{"<think>reasoning</think>"}, "reasoning", std::nullopt},
      {{"reasoning section", "</think>content"}, "reasoning section", "content"},
      {{"I need to read the file.\n\n", "<tool_call>\n<function=bash>"}, "I need to read the file.\n\n",
       "<tool_call>\n<function=bash>"},
  };
  for (const auto& m : cases) {
    const auto s = stream(m.deltas);
    EXPECT_EQ(s.reasoning, m.reasoning);
    EXPECT_EQ(or_none(s.content), m.content);
  }
}

TEST(Qwen3ReasoningParser, EndTagIsHeldBackUntilDecided) {
  Qwen3ReasoningParser parser;
  auto d = parser.feed("abc</thi");
  EXPECT_EQ(d.reasoning, "abc");
  EXPECT_EQ(d.content, "");
  EXPECT_FALSE(parser.reasoning_ended());
  d = parser.feed("nk>xyz");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "xyz");
  EXPECT_TRUE(parser.reasoning_ended());
  d = parser.feed("</think> more");
  EXPECT_EQ(d.content, "</think> more");  // content is never re-parsed
}

TEST(Qwen3ReasoningParser, ToolCallWaitsForFunctionTag) {
  Qwen3ReasoningParser parser;
  auto d = parser.feed("plan <tool_call>");
  EXPECT_EQ(d.reasoning, "plan ");
  d = parser.feed("\n");
  EXPECT_TRUE(d.empty());
  d = parser.feed("<func");
  EXPECT_TRUE(d.empty());
  d = parser.feed("tion=ls>");
  EXPECT_EQ(d.content, "<tool_call>\n<function=ls>");
  EXPECT_TRUE(parser.reasoning_ended());
}

TEST(Qwen3ReasoningParser, UndecidedTagAtEndOfGenerationIsReasoning) {
  Qwen3ReasoningParser parser;
  auto d = parser.feed("thinking </th");
  EXPECT_EQ(d.reasoning, "thinking ");
  d = parser.finish();
  EXPECT_EQ(d.reasoning, "</th");
  EXPECT_EQ(d.content, "");
}

// vLLM's THINKING_DISABLED_CASES: enable_thinking=false -> everything is content.
TEST(Qwen3ReasoningParser, ThinkingDisabled) {
  const ReasoningParserOptions off{.thinking_enabled = false};
  for (const std::string& output : {std::string("This is plain content"), std::string("Some output without think tokens"),
                                   "I need to read the file.\n\n" + kToolCallBody}) {
    const auto split = Qwen3ReasoningParser::extract(output, off);
    EXPECT_EQ(split.reasoning, std::nullopt);
    EXPECT_EQ(split.content, output);
    const auto s = stream({output.substr(0, 5), output.substr(5)}, off);
    EXPECT_EQ(s.reasoning, "");
    EXPECT_EQ(s.content, output);
  }
}

TEST(Qwen3ReasoningParser, PromptThatClosedThinkingMeansContentOnly) {
  // What the Qwen3.6 template renders for enable_thinking=false vs true.
  const std::string closed = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const std::string open = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n";
  EXPECT_TRUE(prompt_ends_reasoning(closed));
  EXPECT_FALSE(prompt_ends_reasoning(open));
  EXPECT_FALSE(prompt_ends_reasoning("no tags at all"));
  // An earlier turn's closed think block does not count once a new one is opened.
  EXPECT_FALSE(prompt_ends_reasoning("<think>a</think>b<|im_start|>assistant\n<think>\n"));

  const auto split = Qwen3ReasoningParser::extract("Hello!", {.prompt_ends_reasoning = true});
  EXPECT_EQ(split.reasoning, std::nullopt);
  EXPECT_EQ(split.content, "Hello!");
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

// Property: for any text built from tag fragments, any split into deltas gives exactly extract().
TEST(Qwen3ReasoningParser, RandomTextsStreamLikeNonStreaming) {
  const std::vector<std::string> pieces = {"<think>", "</think>", "<tool_call>", "<function=", "<function ", "<",
                                           "</", "think", ">", "\n", " ", "a", "<tool_", "</thi", "=", "é"};
  std::uint64_t state = 12345;
  auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const auto len = next(12);
    for (std::uint64_t i = 0; i < len; ++i) text += pieces[next(pieces.size())];
    for (const bool thinking : {true, false}) {
      const ReasoningParserOptions options{.thinking_enabled = thinking};
      const auto whole = Qwen3ReasoningParser::extract(text, options);
      std::vector<std::string> deltas;
      for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t n = 1 + next(6);
        deltas.push_back(text.substr(pos, n));
        pos += n;
      }
      const auto s = stream(deltas, options);
      ASSERT_EQ(or_none(s.reasoning), whole.reasoning) << text;
      ASSERT_EQ(or_none(s.content), whole.content) << text;
      // Nothing is lost: the parts are the text minus at most one removed "<think>" and "</think>".
      EXPECT_LE(s.reasoning.size() + s.content.size(), text.size());
    }
  }
}

}  // namespace
}  // namespace fp4serve::server::openai
