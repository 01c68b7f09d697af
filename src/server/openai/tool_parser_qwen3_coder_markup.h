// The XML-like markup of Qwen3-Coder / Qwen3.5 / Qwen3.6 tool calls and how vLLM's
// Qwen3CoderToolParser finds its structure in text the model wrote:
//
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//
// A parameter value may itself contain tag-like text (code that embeds this format), so a closing
// tag only counts as structural when what follows it is another structural delimiter. These are
// the scanning rules vLLM uses (its _next_structural_param_start, _find_true_param_end,
// _find_true_function_end, _scan_to_structural_function_end, _get_function_calls,
// _parse_xml_function_call), written against string_view. npos means "not found / incomplete".
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::server::openai::qwen3_coder {

inline constexpr std::string_view kToolCallStart = "<tool_call>";
inline constexpr std::string_view kToolCallEnd = "</tool_call>";
inline constexpr std::string_view kFunctionPrefix = "<function=";
inline constexpr std::string_view kFunctionEnd = "</function>";
inline constexpr std::string_view kParameterPrefix = "<parameter=";
inline constexpr std::string_view kParameterEnd = "</parameter>";
inline constexpr std::size_t npos = std::string_view::npos;

using NameSet = std::set<std::string, std::less<>>;

// Next "<parameter=" at or after `from` that starts a line (or the text); with `valid`, its NAME
// must also be one of them.
std::size_t next_structural_param_start(std::string_view text, std::size_t from, const NameSet* valid);

// End of a parameter value: a "</parameter>" followed by a structural "<parameter=NAME>",
// "</function>", "</tool_call>" or (unless require_lookahead) the end of the text; nested
// literal <parameter=...>...</parameter> pairs are skipped.
std::size_t find_true_param_end(std::string_view value_text, const NameSet* valid, bool require_lookahead);

// A "</function>" followed only by whitespace, or by "</tool_call>".
std::size_t find_true_function_end(std::string_view text);

// Walks a function body (text after "<function=NAME>") parameter by parameter and returns where
// its structural "</function>" starts; npos when the body is incomplete.
std::size_t scan_to_structural_function_end(std::string_view body, const NameSet* valid);

// The function-call strings of a model output: for each <tool_call> block (a block ends at a
// "</tool_call>" followed by whitespace and another "<tool_call>" or the end; an unclosed block
// runs to the end), the text after "<function=" up to its structural "</function>". Without any
// <tool_call> the whole output is searched once (vLLM's back-off).
struct FunctionCallSpan {
  std::string_view text;  // from after "<function=" to before its "</function>" (or the end)
  bool closed = false;    // its structural "</function>" was found by the parameter walk
};
std::vector<FunctionCallSpan> function_call_strings(std::string_view model_output, const nlohmann::ordered_json& tools);

// The schema's parameter names of a function, or nullopt when it declares none (vLLM's
// `set(cfg.keys()) if cfg else None`).
std::optional<NameSet> valid_param_names(const nlohmann::ordered_json& tools, std::string_view function_name);

// A name vLLM accepts: non-empty, none of {}<>"' or whitespace.
bool is_valid_function_name(std::string_view name);

struct ParsedFunctionCall {
  std::string name;
  nlohmann::ordered_json arguments;  // object, insertion-ordered
};

// "NAME>\n<parameter=...>...": nullopt when there is no '>' or the name is invalid. May throw
// ToolCallExtractionAborted (see tool_parser_values.h).
std::optional<ParsedFunctionCall> parse_function_call(std::string_view function_call, const nlohmann::ordered_json& tools);

// Where the content before the tool calls ends: the first "<tool_call>" whose block holds a
// "<function=", else the first "<function=".
std::size_t content_end(std::string_view model_output);

}  // namespace fp4serve::server::openai::qwen3_coder
