// Tool-call parser results in OpenAI's shapes (chat `message.tool_calls` and streamed
// `delta.tool_calls`), and the finish_reason rule that goes with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::server::openai {

struct ToolCall {
  std::string id;         // "chatcmpl-tool-<32 hex>" (vLLM's ToolCall default id)
  std::string name;
  std::string arguments;  // JSON text, as json.dumps wrote it
};

// {"id","type":"function","function":{"name","arguments"}}
nlohmann::ordered_json to_json(const ToolCall& call);

struct ToolCallExtraction {
  bool tools_called = false;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> content;  // text before the first tool call; nullopt when empty
};

// One streamed fragment of a tool call. The first fragment of a call carries id, type and name
// (and arguments "" plus whatever is already known); later ones only `arguments` text.
struct ToolCallDelta {
  int index = 0;
  std::optional<std::string> id;    // "call_<24 hex>" on the first fragment (vLLM's streaming id)
  std::optional<std::string> name;  // first fragment only
  std::string arguments;
};

// {"index", ["id", "type":"function"], "function":{["name"], "arguments"}}
nlohmann::ordered_json to_json(const ToolCallDelta& delta);

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// vLLM chat serving: "tool_calls" when the parser found calls under tool_choice "auto" (or a
// "required" request stopped normally), otherwise the engine's reason ("stop" when it has none).
// A named tool_choice keeps the engine's reason.
std::string chat_finish_reason(std::string_view engine_finish_reason, ToolChoice tool_choice, bool tools_called);

// vLLM chat streaming (serving.py: `auto_tools_called or (tools_streamed[i] and not
// tool_choice_function_name)`): "tool_calls" whenever tool-call deltas were streamed under a
// non-named tool_choice, even when the engine stopped for "length"; otherwise the engine's reason.
std::string chat_stream_finish_reason(std::string_view engine_finish_reason, ToolChoice tool_choice,
                                      bool tools_streamed);

// Random ids in vLLM's forms.
std::string make_chat_tool_call_id();       // "chatcmpl-tool-" + 32 hex digits
std::string make_streaming_tool_call_id();  // "call_" + 24 hex digits

}  // namespace fp4serve::server::openai
