// Parameter values of the qwen3_coder tool-call format: the model writes every argument as raw
// text between <parameter=NAME> tags; vLLM converts it by the tool's JSON-schema type
// (Qwen3CoderToolParser._convert_param_value) and serialises the arguments with Python's
// json.dumps(..., ensure_ascii=False). Both are reproduced here, including the fallbacks
// (int/float that do not parse stay strings, unknown types go through ast.literal_eval).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai/tool_parser_python_literal.h"

namespace fp4serve::server::openai {

// tools[i].function.parameters.properties of the tool named `function_name` in the request's
// `tools` array, or an empty object (vLLM's find_tool_properties).
nlohmann::ordered_json find_tool_properties(const nlohmann::ordered_json& tools, std::string_view function_name);

// _convert_param_value: `properties` is find_tool_properties(...) of the called function.
nlohmann::ordered_json convert_param_value(const std::string& value, const std::string& param_name,
                                           const nlohmann::ordered_json& properties);

// json.dumps(value, ensure_ascii=False): ", " and ": " separators, non-ASCII kept, floats as
// Python's repr, NaN/Infinity spelled as Python does.
std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace fp4serve::server::openai
