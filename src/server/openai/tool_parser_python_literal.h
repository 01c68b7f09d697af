// Python's rules for reading literal text, as vLLM's qwen3_coder parser applies them to parameter
// values: ast.literal_eval, int(text), float(text).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fp4serve::server::openai {

// vLLM lets a few conversion errors escape _convert_param_value (float("inf") -> int(inf) raises
// OverflowError; json.dumps of a Python set raises TypeError); they end in extract_tool_calls'
// catch-all, which reports no tool calls and the whole output as content. Thrown to mirror that.
class ToolCallExtractionAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ast.literal_eval of a Python literal (numbers, strings, True/False/None, lists, tuples, dicts)
// as the JSON value json.dumps would make of it; nullopt where Python raises ValueError /
// SyntaxError. Sets and complex numbers throw ToolCallExtractionAborted (json.dumps would fail).
std::optional<nlohmann::ordered_json> python_literal_eval(std::string_view text);

// Python's int(text) / float(text) acceptance rules (whitespace, sign, underscores; inf/nan).
std::optional<long long> python_int(std::string_view text);
std::optional<double> python_float(std::string_view text);

}  // namespace fp4serve::server::openai
