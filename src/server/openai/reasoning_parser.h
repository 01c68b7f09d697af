// Qwen3 reasoning parser (`--reasoning-parser qwen3`): splits generated text into the thinking part
// (`message.reasoning` / `delta.reasoning`) and the answer (`content`), with vLLM's semantics
// (vllm/reasoning/qwen3_reasoning_parser.py):
//   - Qwen3.5/3.6 templates put "<think>\n" in the prompt, so the output starts inside reasoning and
//     only "</think>" appears; everything before it is reasoning, everything after it is content.
//   - An older template lets the model emit "<think>" itself; that tag is dropped.
//   - No "</think>" at all while thinking is on means the output was truncated: all reasoning.
//   - "<tool_call>" followed (after whitespace) by "<function=" or "<function " ends reasoning
//     implicitly (Qwen3.5 sometimes calls a tool without closing </think>); the tool call is content.
//   - Thinking off (enable_thinking=false: the template already closed the think block in the
//     prompt): everything is content.
//
// The streaming parser is text based: a tag split across deltas is held back until it is decided,
// so the concatenated streaming output always equals extract() on the whole text. Where vLLM's own
// streaming and non-streaming paths disagree we pick one rule for both (see DESIGN NOTES in the
// .cpp and the task report).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fp4serve::server::openai {

// The qwen3 parser's markers (its reasoning_start_str / reasoning_end_str), which vLLM's
// ReasoningConfig also takes for thinking_token_budget.
inline constexpr std::string_view kQwen3ReasoningStart = "<think>";
inline constexpr std::string_view kQwen3ReasoningEnd = "</think>";

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // nullopt when empty (vLLM's `or None`)
  std::optional<std::string> content;    // nullopt when empty
};

struct ReasoningDelta {
  std::string reasoning;  // may be empty
  std::string content;    // may be empty
  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct ReasoningParserOptions {
  // chat_template_kwargs.enable_thinking (default true for Qwen3).
  bool thinking_enabled = true;
  // True when the rendered prompt already ended the think block (vLLM's prompt_is_reasoning_end:
  // scanning the prompt backwards, "</think>" is met before "<think>"). Use
  // prompt_ends_reasoning() to compute it from the rendered prompt text.
  bool prompt_ends_reasoning = false;
};

// vLLM's prompt_is_reasoning_end on text: the last of "<think>" / "</think>" in the prompt is
// "</think>". A Qwen3.6 prompt rendered with enable_thinking=false ends "<think>\n\n</think>\n\n".
bool prompt_ends_reasoning(std::string_view prompt_text);

class Qwen3ReasoningParser {
 public:
  explicit Qwen3ReasoningParser(ReasoningParserOptions options = {});

  // Streaming: feed each new piece of decoded text; returns what became certain.
  ReasoningDelta feed(std::string_view delta_text);
  // End of generation: flushes anything still held back (an undecided partial tag).
  ReasoningDelta finish();

  // True once the reasoning part is over (content mode). The tool-call parser should only see
  // content, as in vLLM.
  bool reasoning_ended() const { return !in_reasoning_; }

  // Non-streaming: the whole output at once (a fresh parser, feed + finish).
  static ReasoningSplit extract(std::string_view model_output, ReasoningParserOptions options = {});

 private:
  void scan(bool final, ReasoningDelta& out);

  bool in_reasoning_;
  bool think_tag_stripped_ = false;
  std::string pending_;  // text not yet classified (starts at an undecided '<' or is empty)
};

}  // namespace fp4serve::server::openai
