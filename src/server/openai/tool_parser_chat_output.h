// The whole post-processing of a chat completion's text as vLLM's chat serving chains it:
// reasoning parser first (--reasoning-parser qwen3), then, on the content part only, the tool-call
// parser (--enable-auto-tool-choice --tool-call-parser qwen3_coder, tool_choice "auto"), or for a
// forced tool_choice ("required", named) the JSON the constraint produced (forced_tool_calls.h).
// One non-streaming function and one streaming object whose concatenated deltas equal it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/forced_tool_calls.h"
#include "server/openai/reasoning_parser.h"
#include "server/openai/tool_parser.h"
#include "server/openai/tool_parser_qwen3_coder.h"

namespace fp4serve::server::openai {

struct ChatOutputOptions {
  bool reasoning_parser = false;      // --reasoning-parser qwen3 given
  ReasoningParserOptions reasoning;   // enable_thinking, prompt_ends_reasoning(prompt)
  bool tool_parser = false;           // auto tool choice with a qwen3_coder parser and tools
  nlohmann::ordered_json tools;       // the request's tools array
  // tool_choice "required" or named (kRequired/kNamed): the content is the constrained JSON and
  // becomes tool calls; kNone otherwise. Takes the place of the auto tool parser.
  ToolChoice forced = ToolChoice::kNone;
  std::string forced_function;        // the named function
  bool forced_tools() const { return forced == ToolChoice::kRequired || forced == ToolChoice::kNamed; }
};

struct ChatOutput {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<ToolCall> tool_calls;  // ids "chatcmpl-tool-..."
  bool tools_called = false;         // feeds chat_finish_reason(...)
};

// vLLM non-streaming: content is what the tool parser left before the first call when calls were
// found, the reasoning parser's content otherwise.
ChatOutput parse_chat_output(std::string_view text, const ChatOutputOptions& options);

struct ChatOutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatOutputStreamParser {
 public:
  explicit ChatOutputStreamParser(ChatOutputOptions options);
  ChatOutputDelta feed(std::string_view delta_text);
  ChatOutputDelta finish();
  bool tools_called() const { return tools_ && tools_->tools_called(); }
  bool parses_content() const { return tools_ || forced_; }

 private:
  void route_content(const std::string& content, bool final, ChatOutputDelta& out);

  ChatOutputOptions options_;
  std::optional<Qwen3ReasoningParser> reasoning_;
  std::optional<Qwen3CoderToolStreamParser> tools_;
  std::optional<ForcedToolStreamParser> forced_;
};

}  // namespace fp4serve::server::openai
