// `--tool-call-parser qwen3_coder`: turns the model's XML-like tool-call markup into OpenAI
// tool_calls, non-streaming (vLLM's Qwen3CoderToolParser.extract_tool_calls) and streaming.
//
// Streaming follows vLLM's delta shapes: when "<function=NAME>" is complete, one fragment with
// index, id, type, name and arguments "{"; then one fragment per completed parameter
// ("\"p\": value", later ones prefixed ", "); "}" when the function closes. The concatenated
// arguments equal the non-streaming arguments (json.dumps form).
//
// Rules where vLLM's two paths differ (one rule for both here, so streaming == non-streaming):
// - Text after the first tool call (between or after calls) is dropped, as extract_tool_calls
//   does; vLLM streaming would emit trailing non-whitespace text as content.
// - At the end of generation an unterminated call (no </function>, e.g. max_tokens hit) is
//   completed from what is there, as extract_tool_calls does: its remaining arguments and "}" are
//   sent by finish() (vLLM's serving layer sends the "remaining arguments" at the end similarly).
// - Malformed markup with no "<function=" stays content. A call whose name is invalid is dropped
//   (later calls keep consecutive indices). When no call at all comes out, the stream ends with the
//   whole text as content, as vLLM's chat serving shows it (it ignores extract's content when
//   tools_called is false); extract_qwen3_coder_tool_calls itself keeps vLLM's content field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/tool_parser.h"

namespace fp4serve::server::openai {

// Non-streaming. `tools` is the request's tools array (may be null/empty).
ToolCallExtraction extract_qwen3_coder_tool_calls(std::string_view model_output, const nlohmann::ordered_json& tools);

class Qwen3CoderToolStreamParser {
 public:
  explicit Qwen3CoderToolStreamParser(nlohmann::ordered_json tools);

  // Feed the content text (after the reasoning parser) as it arrives.
  ToolStreamDelta feed(std::string_view delta_text);
  // End of generation: completes an unterminated call and flushes held-back content (all of the
  // rest when no tool call was produced).
  ToolStreamDelta finish();

  bool tools_called() const { return next_index_ > 0; }

 private:
  struct CallState {
    bool decided = false;  // name known (header sent) or call dropped
    bool dropped = false;
    bool closed = false;
    int index = -1;
    std::string arguments_sent;
  };

  ToolStreamDelta step(bool final);
  void emit_content(std::size_t upto, ToolStreamDelta& out);
  void advance_calls(bool final, ToolStreamDelta& out);
  // Emits target[sent.size():] when what was sent is a prefix of target.
  static void emit_arguments(const std::string& target, CallState& call, ToolStreamDelta& out);

  nlohmann::ordered_json tools_;
  std::string text_;
  std::size_t content_sent_ = 0;
  std::size_t content_end_ = std::string::npos;  // set once a tool call has begun
  std::vector<CallState> calls_;
  int next_index_ = 0;
};

}  // namespace fp4serve::server::openai
