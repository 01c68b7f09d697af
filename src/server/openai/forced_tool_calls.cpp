#include "server/openai/forced_tool_calls.h"

#include "server/openai/client_json.h"
#include "server/openai/openai_error.h"
#include "server/openai/tool_parser_values.h"

namespace fp4serve::server::openai {

namespace {

using Json = nlohmann::ordered_json;

const Json* function_of(const Json& tool) {
  if (!tool.is_object()) return nullptr;
  auto f = tool.find("function");
  return f != tool.end() && f->is_object() ? &*f : nullptr;
}

// _get_tool_schema_from_name_and_params: a tool without parameters accepts any object.
Json element_schema(const std::string& name, Json params) {
  if (!params.is_object() || params.empty()) params = Json{{"type", "object"}, {"properties", Json::object()}};
  Json schema = Json::object();
  schema["properties"] = Json{{"name", Json{{"type", "string"}, {"enum", Json::array({name})}}}, {"parameters", params}};
  schema["required"] = Json::array({"name", "parameters"});
  return schema;
}

Json required_schema(const Json& tools) {
  Json any_of = Json::array();
  Json defs = Json::object();
  for (const Json& tool : tools) {
    const Json* f = function_of(tool);
    if (!f) continue;
    const std::string name = f->value("name", std::string());
    Json params = f->contains("parameters") ? (*f)["parameters"] : Json();
    // _get_tool_schema_defs pops each tool's $defs (so the element schema no longer has them) and
    // gathers them at the root, where "#/$defs/X" references then resolve.
    if (params.is_object() && params.contains("$defs")) {
      for (const auto& [def_name, def_schema] : params["$defs"].items()) {
        if (defs.contains(def_name) && defs[def_name] != def_schema) {
          throw ApiException(value_error("Tool definition '" + def_name +
                                         "' has multiple schemas, which is not supported."));
        }
        defs[def_name] = def_schema;
      }
      params.erase("$defs");
    }
    any_of.push_back(element_schema(name, std::move(params)));
  }
  Json schema = Json::object();
  schema["type"] = "array";
  schema["minItems"] = 1;
  schema["items"] = Json{{"type", "object"}, {"anyOf", std::move(any_of)}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema;
}

}  // namespace

std::optional<Json> forced_tool_schema(ToolChoice choice, const std::string& function, const Json& tools) {
  if (!tools.is_array()) return std::nullopt;
  if (choice == ToolChoice::kRequired) return required_schema(tools);
  if (choice != ToolChoice::kNamed) return std::nullopt;
  for (const Json& tool : tools) {
    const Json* f = function_of(tool);
    if (!f || f->value("name", std::string()) != function) continue;
    auto params = f->find("parameters");
    if (params == f->end() || params->is_null()) return std::nullopt;
    return *params;
  }
  return std::nullopt;  // the request validator already refused an unknown name
}

namespace {

std::optional<ToolCall> call_of_element(const Json& element) {
  if (!element.is_object()) return std::nullopt;
  auto name = element.find("name");
  if (name == element.end() || !name->is_string()) return std::nullopt;
  ToolCall call;
  call.id = make_chat_tool_call_id();
  call.name = name->get<std::string>();
  auto params = element.find("parameters");
  call.arguments = python_json_dumps(params == element.end() ? Json() : *params);
  return call;
}

std::optional<Json> parse_bounded(std::string_view text) {
  // The output is generated text: bound its nesting before nlohmann recurses (client_json.h).
  if (find_excess_nesting(text)) return std::nullopt;
  try {
    return Json::parse(text);
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::vector<ToolCall>> parse_forced_tool_calls(ToolChoice choice, const std::string& function,
                                                             std::string_view content) {
  if (choice == ToolChoice::kNamed) {
    ToolCall call;
    call.id = make_chat_tool_call_id();
    call.name = function;
    call.arguments = std::string(content);
    return std::vector<ToolCall>{std::move(call)};
  }
  if (choice != ToolChoice::kRequired) return std::nullopt;
  auto parsed = parse_bounded(content);
  if (!parsed || !parsed->is_array()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const Json& element : *parsed) {
    auto call = call_of_element(element);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

ForcedToolStreamParser::ForcedToolStreamParser(ToolChoice choice, std::string function)
    : choice_(choice), function_(std::move(function)) {}

std::vector<ToolCallDelta> ForcedToolStreamParser::feed(std::string_view content) {
  if (content.empty()) return {};
  if (choice_ == ToolChoice::kNamed) {
    ToolCallDelta d;
    d.index = 0;  // one call per choice (vLLM puts the choice index here, 0 for n = 1)
    d.arguments = std::string(content);
    if (!name_sent_) {
      d.id = make_chat_tool_call_id();
      d.name = function_;
      name_sent_ = true;
    }
    return {std::move(d)};
  }
  if (choice_ != ToolChoice::kRequired) return {};
  buffer_.append(content);
  return scan_required();
}

std::vector<ToolCallDelta> ForcedToolStreamParser::scan_required() {
  std::vector<ToolCallDelta> out;
  for (; scanned_ < buffer_.size(); ++scanned_) {
    const char c = buffer_[scanned_];
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (depth_ == 1) element_start_ = scanned_;  // an element of the top-level array opens
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
      if (depth_ == 1) {  // the element closed: it is a whole call
        auto element = parse_bounded(std::string_view(buffer_).substr(element_start_, scanned_ + 1 - element_start_));
        if (auto call = element ? call_of_element(*element) : std::nullopt) {
          ToolCallDelta d;
          d.index = calls_++;
          d.id = call->id;
          d.name = call->name;
          d.arguments = call->arguments;
          out.push_back(std::move(d));
        }
      }
    }
  }
  return out;
}

}  // namespace fp4serve::server::openai
