#include "server/openai/structured_outputs_request.h"

#include <algorithm>

#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

namespace {

using Kind = engine::StructuredOutputsParams::Kind;

std::string py_opt(const std::optional<std::string>& s) { return s ? py_str_repr(*s) : "None"; }
std::string py_bool(bool b) { return b ? "True" : "False"; }


// A VLLMValidationError raised inside a dataclass's __post_init__ while pydantic validates the
// field: a "value_error" at the field, the field's input as input.
ValidationIssue post_init_issue(const std::string& message, const Json& input) {
  ValidationIssue i = make_issue("value_error", {"body", "structured_outputs"}, "Value error, " + message, input,
                            "{'error': VLLMValidationError(" + py_str_repr(message) + ")}");
  i.from_vllm_error = true;
  return i;
}

std::string too_many_message(const RequestStructuredOutputs& so) {
  return "You can only use one kind of structured outputs constraint but multiple are specified: " +
         so.dict_repr();
}

std::string none_message(const RequestStructuredOutputs& so) {
  return "You must use one kind of structured outputs constraint but none are specified: " + so.dict_repr();
}

}  // namespace

std::string RequestStructuredOutputs::dict_repr() const {
  std::string choice_repr = "None";
  if (choice) choice_repr = py_repr(Json(*choice));
  return "{'json': " + (json ? py_repr(*json) : std::string("None")) + ", 'regex': " + py_opt(regex) +
         ", 'choice': " + choice_repr + ", 'grammar': " + py_opt(grammar) +
         ", 'json_object': " + (json_object ? py_bool(*json_object) : std::string("None")) +
         ", 'disable_any_whitespace': " + py_bool(disable_any_whitespace) +
         ", 'disable_additional_properties': " + py_bool(disable_additional_properties) +
         ", 'whitespace_pattern': " + py_opt(whitespace_pattern) + ", 'structural_tag': " + py_opt(structural_tag) +
         ", '_backend': None, '_backend_was_auto': False}";
}

int RequestStructuredOutputs::constraint_count() const {
  return int(json.has_value()) + int(regex.has_value()) + int(choice.has_value()) + int(grammar.has_value()) +
         int(json_object.has_value()) + int(structural_tag.has_value());
}

std::optional<RequestStructuredOutputs> read_structured_outputs(BodyReader& reader) {
  const Json* v = reader.raw("structured_outputs");
  if (!v || v->is_null()) return std::nullopt;
  auto& issues = reader.issues();
  if (!v->is_object()) {
    issues.push_back(make_issue("dataclass_type", {"body", "structured_outputs"},
                           "Input should be a dictionary or an instance of StructuredOutputsParams", *v,
                           "{'class_name': 'StructuredOutputsParams'}"));
    return std::nullopt;
  }
  const std::size_t faults = issues.size();
  RequestStructuredOutputs so;
  auto loc = [](const char* field) { return Loc{"body", "structured_outputs", field}; };
  // Optional fields: absent or null is None.
  auto get = [&](const char* key) -> const Json* {
    auto it = v->find(key);
    return it == v->end() || it->is_null() ? nullptr : &*it;
  };
  if (const Json* j = get("json")) {
    if (j->is_string() || j->is_object()) {
      so.json = *j;
    } else {  // str | dict: pydantic reports both branches
      issues.push_back(make_issue("string_type", {"body", "structured_outputs", "json", "str"},
                             "Input should be a valid string", *j));
      issues.push_back(make_issue("dict_type", {"body", "structured_outputs", "json", "dict[any,any]"},
                             "Input should be a valid dictionary", *j));
    }
  }
  if (const Json* r = get("regex")) so.regex = coerce_string(*r, loc("regex"), issues);
  if (const Json* c = get("choice")) so.choice = coerce_string_list(*c, loc("choice"), issues);
  if (const Json* g = get("grammar")) so.grammar = coerce_string(*g, loc("grammar"), issues);
  if (const Json* o = get("json_object")) so.json_object = coerce_bool(*o, loc("json_object"), issues);
  if (const Json* w = get("whitespace_pattern")) so.whitespace_pattern = coerce_string(*w, loc("whitespace_pattern"), issues);
  if (const Json* t = get("structural_tag")) so.structural_tag = coerce_string(*t, loc("structural_tag"), issues);
  // Plain bools: null is a fault.
  for (const char* key : {"disable_any_whitespace", "disable_additional_properties"}) {
    auto it = v->find(key);
    if (it == v->end()) continue;
    auto b = coerce_bool(*it, loc(key), issues);
    if (b) (std::string(key) == "disable_any_whitespace" ? so.disable_any_whitespace : so.disable_additional_properties) = *b;
  }
  if (issues.size() != faults) return std::nullopt;
  // __post_init__ runs once the fields validate.
  const int count = so.constraint_count();
  if (count != 1) {
    issues.push_back(post_init_issue(count > 1 ? too_many_message(so) : none_message(so), *v));
    return std::nullopt;
  }
  return so;
}

std::optional<RequestResponseFormat> read_response_format(BodyReader& reader) {
  const Json* v = reader.raw("response_format");
  if (!v || v->is_null()) return std::nullopt;
  auto& issues = reader.issues();
  // AnyResponseFormat is a union of three models; pydantic would list a fault per branch. One
  // fault naming the accepted types says the same thing.
  if (!v->is_object()) {
    issues.push_back(make_issue("model_type", {"body", "response_format"},
                           "Input should be a valid dictionary or instance of ResponseFormat", *v,
                           "{'class_name': 'ResponseFormat'}"));
    return std::nullopt;
  }
  auto type = v->find("type");
  if (type == v->end()) {
    issues.push_back(make_issue("missing", {"body", "response_format", "type"}, "Field required", *v));
    return std::nullopt;
  }
  static const char* kTypes[] = {"text", "json_object", "json_schema", "structural_tag"};
  const bool known = type->is_string() &&
                     std::any_of(std::begin(kTypes), std::end(kTypes), [&](const char* t) { return *type == t; });
  if (!known) {
    issues.push_back(make_issue("literal_error", {"body", "response_format", "type"},
                           "Input should be 'text', 'json_object', 'json_schema' or 'structural_tag'", *type,
                           "{'expected': \"'text', 'json_object', 'json_schema' or 'structural_tag'\"}"));
    return std::nullopt;
  }
  RequestResponseFormat rf;
  rf.type = type->get<std::string>();
  if (rf.type != "json_schema") return rf;
  // JsonSchemaResponseFormat: name (required str), description, schema (dict | None), strict.
  // (A json_schema type without json_schema was refused by check_response_format already.)
  auto js = v->find("json_schema");
  if (js == v->end() || js->is_null()) return rf;
  const Loc base{"body", "response_format", "json_schema"};
  if (!js->is_object()) {
    issues.push_back(make_issue("model_type", base, "Input should be a valid dictionary or instance of JsonSchemaResponseFormat",
                           *js, "{'class_name': 'JsonSchemaResponseFormat'}"));
    return std::nullopt;
  }
  const std::size_t faults = issues.size();
  auto at = [&](const char* key) {
    Loc l = base;
    l.push_back(key);
    return l;
  };
  if (auto name = js->find("name"); name == js->end()) {
    issues.push_back(make_issue("missing", at("name"), "Field required", *js));
  } else {
    coerce_string(*name, at("name"), issues);
  }
  if (auto d = js->find("description"); d != js->end() && !d->is_null()) coerce_string(*d, at("description"), issues);
  if (auto s = js->find("strict"); s != js->end() && !s->is_null()) coerce_bool(*s, at("strict"), issues);
  if (auto s = js->find("schema"); s != js->end() && !s->is_null()) {
    if (s->is_object()) rf.schema = *s;
    else issues.push_back(make_issue("dict_type", at("schema"), "Input should be a valid dictionary", *s));
  }
  if (issues.size() != faults) return std::nullopt;
  return rf;
}

engine::StructuredOutputsParams to_engine_structured_outputs(const RequestStructuredOutputs& so) {
  // The engine has no structural-tag support (the grammar engine could build one, but the
  // tool-call formats it would serve are not wired): say so instead of ignoring it.
  if (so.structural_tag) {
    throw ApiException(vllm_validation_error(
        "structural_tag constraints are not supported by fp4serve; use json, regex, choice or grammar.",
        "structured_outputs"));
  }
  engine::StructuredOutputsParams p;
  if (so.json) {
    p.kind = Kind::kJson;
    p.spec = so.json->is_string() ? so.json->get<std::string>() : so.json->dump();
  } else if (so.json_object) {
    // vLLM's get_structured_output_key tests `json_object` for truth; False is no constraint there
    // and the engine fails the request ("No valid structured output parameter found").
    if (!*so.json_object) throw ApiException(value_error("No valid structured output parameter found"));
    p.kind = Kind::kJsonObject;
  } else if (so.regex) {
    p.kind = Kind::kRegex;
    p.spec = *so.regex;
  } else if (so.choice) {
    p.kind = Kind::kChoice;
    p.choice = *so.choice;
  } else {
    p.kind = Kind::kGrammar;
    p.spec = so.grammar.value_or("");
  }
  p.disable_any_whitespace = so.disable_any_whitespace;
  p.disable_additional_properties = so.disable_additional_properties;
  p.whitespace_pattern = so.whitespace_pattern;
  if (auto error = engine::structured_outputs_error(p)) throw ApiException(vllm_validation_error(*error));
  return p;
}

std::optional<RequestStructuredOutputs> merge_response_format(
    const std::optional<RequestStructuredOutputs>& structured_outputs,
    const std::optional<RequestResponseFormat>& response_format) {
  if (response_format && response_format->type == "structural_tag") {
    throw ApiException(vllm_validation_error(
        "response_format type 'structural_tag' is not supported by fp4serve; use 'json_schema' or 'json_object'.",
        "response_format"));
  }
  if (!response_format || response_format->type == "text") return structured_outputs;
  // dataclasses.replace(structured_outputs, **overrides), or a fresh one with the override only.
  RequestStructuredOutputs merged = structured_outputs.value_or(RequestStructuredOutputs{});
  if (response_format->type == "json_object") merged.json_object = true;
  else merged.json = response_format->schema;  // json_schema; None when it carries no schema
  const int count = merged.constraint_count();
  if (count > 1) throw ApiException(vllm_validation_error(too_many_message(merged)));
  if (count < 1) throw ApiException(vllm_validation_error(none_message(merged)));
  return merged;
}

}  // namespace fp4serve::server::openai
