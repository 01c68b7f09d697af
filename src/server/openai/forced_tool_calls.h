// tool_choice "required" and a named function: the JSON schema the output is constrained to, and
// the tool calls made of the constrained output, as vLLM does it [vllm: tool_parsers/utils.py
// get_json_schema_from_tools, tool_parsers/abstract_tool_parser.py adjust_request,
// entrypoints/openai/chat_completion/serving.py]:
//   - named: the function's `parameters` schema; the whole content is that call's arguments;
//   - required: an array (minItems 1) of {"name": <one of the tools>, "parameters": <its schema>}
//     (anyOf over the tools, their `$defs` lifted to the root); each element is a call whose
//     arguments are json.dumps(parameters).
// The qwen3_coder XML format of tool_choice "auto" is not involved (tool_parser_qwen3_coder.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/tool_parser.h"

namespace fp4serve::server::openai {

// The schema for a forced tool_choice over `tools` (the request's tools as chat_request.h dumps
// them), or nullopt where vLLM sets no constraint: "none"/"auto", or a named function declared
// without `parameters`. Throws ApiException (400) for two tools that define one `$defs` name
// differently, with vLLM's text.
std::optional<nlohmann::ordered_json> forced_tool_schema(ToolChoice choice, const std::string& function,
                                                         const nlohmann::ordered_json& tools);

// Non-streamed: the calls in `content` (the text after the reasoning). Named: one call with the
// content as arguments. Required: one call per array element; nullopt when the content is not
// such an array (e.g. cut by max_tokens), and the caller then returns the text as content.
std::optional<std::vector<ToolCall>> parse_forced_tool_calls(ToolChoice choice, const std::string& function,
                                                             std::string_view content);

// Streamed. Named: the first fragment carries a fresh id, the name and the first argument text;
// later ones the argument text as it arrives (vLLM's named-function streaming). Required: vLLM
// streams each element's name and argument diffs with a partial-JSON parser; here each call is
// sent whole (id, name, arguments) once its array element is complete, which is simpler and gives
// the client the same calls, only in fewer fragments.
class ForcedToolStreamParser {
 public:
  ForcedToolStreamParser(ToolChoice choice, std::string function);
  std::vector<ToolCallDelta> feed(std::string_view content);

 private:
  std::vector<ToolCallDelta> scan_required();

  ToolChoice choice_;
  std::string function_;
  bool name_sent_ = false;  // named
  // required: the content so far and a JSON scanner over it (depth, strings, escapes).
  std::string buffer_;
  std::size_t scanned_ = 0, element_start_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  int calls_ = 0;
};

}  // namespace fp4serve::server::openai
