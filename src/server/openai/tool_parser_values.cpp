#include "server/openai/tool_parser_values.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "server/openai/client_json.h"
#include "server/openai/tool_parser_python_literal.h"

#include "server/openai/python_text.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace fp4serve::server::openai {
namespace {

using json = nlohmann::ordered_json;

std::string_view strip(std::string_view s) { return py_strip(s); }

std::string lower(std::string_view s) { return py_lower(s); }

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Python's str(x) for a JSON schema "type" value: the string itself, or a marker that matches none
// of vLLM's type names (a list such as ["string","null"] prints as "['string', 'null']").
std::string type_name(const json& type) {
  if (type.is_string()) return lower(strip(type.get_ref<const std::string&>()));
  return "[non-string type]";
}

bool one_of(const std::string& s, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return s == n; });
}

}  // namespace

std::string python_json_dumps(const json& value) {
  // The chat template's json.dumps (tojson) is the same Python function; one implementation.
  return jinja::py_json_dumps(jinja::Value::from_json(value), jinja::JsonDumpOptions{}, jinja::SourcePos{});
}

json find_tool_properties(const json& tools, std::string_view function_name) {
  if (!tools.is_array()) return json::object();
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) continue;
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>() != function_name) continue;
    const auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) return json::object();
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return json::object();
    return *props;
  }
  return json::object();
}

json convert_param_value(const std::string& value, const std::string& param_name, const json& properties) {
  if (!properties.is_object() || !properties.contains(param_name)) return json(value);
  const json& config = properties.at(param_name);

  bool allows_null = false;
  std::string param_type = "string";
  if (config.is_object() && config.contains("type")) {
    param_type = type_name(config.at("type"));
    allows_null = param_type == "null";
  } else if (config.is_object() && config.contains("anyOf")) {
    // First non-null type of a union; {"anyOf":[{"type":"string"},{"type":"null"}]} is a nullable string.
    bool picked = false;
    if (config.at("anyOf").is_array()) {
      for (const auto& option : config.at("anyOf")) {
        if (!option.is_object() || !option.contains("type")) continue;
        const std::string t = type_name(option.at("type"));
        if (t == "null") {
          allows_null = true;
        } else if (!picked) {
          param_type = t;
          picked = true;
        }
      }
    }
  }
  const std::string lowered = lower(value);
  const bool is_null_word = lowered == "null" || lowered == "none";
  if (allows_null && is_null_word) return json(nullptr);
  if (one_of(param_type, {"string", "str", "text", "varchar", "char", "enum"})) return json(value);
  if (is_null_word) return json(nullptr);

  if (starts_with(param_type, "int") || starts_with(param_type, "uint") || starts_with(param_type, "long") ||
      starts_with(param_type, "short") || starts_with(param_type, "unsigned")) {
    if (auto v = python_int(value)) return json(*v);
    return json(value);
  }
  if (starts_with(param_type, "num") || starts_with(param_type, "float")) {
    const auto f = python_float(value);
    if (!f) return json(value);
    if (std::isnan(*f)) return json(value);  // int(nan) raises ValueError: kept as text
    if (std::isinf(*f)) throw ToolCallExtractionAborted("int(inf) overflows");  // uncaught in vLLM
    const double whole = std::trunc(*f);
    if (*f - whole != 0.0) return json(*f);
    if (std::fabs(whole) < 9.2e18) return json(static_cast<std::int64_t>(whole));
    return json(*f);  // Python prints the exact big int here; we keep the float (rare)
  }
  if (one_of(param_type, {"boolean", "bool", "binary"})) return json(lowered == "true");

  const bool is_container = one_of(param_type, {"object", "array", "arr"}) || starts_with(param_type, "dict") ||
                            starts_with(param_type, "list");
  if (is_container) {
    // Model output: nesting past the client-JSON bound is kept as text rather than parsed.
    json parsed = find_excess_nesting(value) ? json(json::value_t::discarded)
                                             : json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) {
      // A JSON-encoded Python repr ("{'k': 'v'}" inside quotes) is decoded once more.
      if (parsed.is_string()) {
        if (auto inner = python_literal_eval(parsed.get_ref<const std::string&>())) return *inner;
      }
      return parsed;
    }
  }
  auto literal = python_literal_eval(value);
  if (!literal) return json(value);
  if (is_container && literal->is_string()) {
    if (auto inner = python_literal_eval(literal->get_ref<const std::string&>())) return *inner;
  }
  return *literal;
}

}  // namespace fp4serve::server::openai
