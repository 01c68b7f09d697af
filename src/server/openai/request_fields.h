// Typed reading of an OpenAI request body with pydantic v2's lax-mode rules and error texts, so a
// wrong type gets the 400 vLLM (FastAPI + pydantic) sends: e.g. "temperature": "hot" ->
// {'type': 'float_parsing', 'loc': ('body', 'temperature'), 'msg': 'Input should be a valid
// number, unable to parse string as a number', 'input': 'hot'}. Faults are collected, not thrown,
// because pydantic reports every field fault of a body at once.
//
// Lax coercions copied from pydantic: "12" -> 12, 3.0 -> 3, true -> 1 for ints; "1.5", ints and
// bools for floats; "yes"/"off"/"1"/0/1 for bools; nothing for strings.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/openai_error.h"

namespace fp4serve::server::openai {

using Json = nlohmann::ordered_json;
using Loc = std::vector<std::string>;

// One pydantic error: its type, location, message, the offending input and pydantic's ctx repr.
ValidationIssue make_issue(const char* type, Loc loc, std::string msg, const Json& input,
                           std::optional<std::string> ctx_repr = std::nullopt);

// Element conversions: record an issue at `loc` and return nullopt when `v` does not convert.
// A JSON null is a fault here (the *_field readers below handle Optional fields).
std::optional<bool> coerce_bool(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues);
std::optional<int64_t> coerce_int(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues);
std::optional<double> coerce_float(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues);
std::optional<std::string> coerce_string(const Json& v, const Loc& loc,
                                         std::vector<ValidationIssue>& issues);
std::optional<std::vector<int64_t>> coerce_int_list(const Json& v, const Loc& loc,
                                                    std::vector<ValidationIssue>& issues);
std::optional<std::vector<std::string>> coerce_string_list(const Json& v, const Loc& loc,
                                                           std::vector<ValidationIssue>& issues);

// Strict-mode checks (no coercion), for pydantic's smart unions which try strict first.
bool is_strict_int(const Json& v);
bool is_strict_int_list(const Json& v);
bool is_strict_string_list(const Json& v);

class BodyReader {
 public:
  explicit BodyReader(const Json& body) : body_(body) {}

  // The raw member, or nullptr when absent. Marks the key as known.
  const Json* raw(const std::string& key);
  bool present(const std::string& key) { return raw(key) != nullptr; }
  bool present_not_null(const std::string& key) {
    const Json* v = raw(key);
    return v && !v->is_null();
  }

  // Typed fields. Absent -> nullopt. JSON null -> nullopt when `nullable` (Python `X | None`), a
  // type fault otherwise. A fault is recorded and the result is nullopt.
  std::optional<bool> bool_field(const std::string& key, bool nullable = true);
  std::optional<int64_t> int_field(const std::string& key, bool nullable = true);
  std::optional<double> float_field(const std::string& key, bool nullable = true);
  std::optional<std::string> string_field(const std::string& key, bool nullable = true);
  std::optional<std::vector<int64_t>> int_list_field(const std::string& key, bool nullable = true);
  std::optional<std::vector<std::string>> string_list_field(const std::string& key,
                                                            bool nullable = true);
  // dict[str, float] (logit_bias), in body order.
  std::optional<std::vector<std::pair<std::string, double>>> float_dict_field(
      const std::string& key);
  // dict[str, Any] (chat_template_kwargs, kv_transfer_params, ...).
  std::optional<Json> object_field(const std::string& key);

  // Keys of the body that no reader asked for, in body order: vLLM accepts and ignores them with
  // "The following fields were present in the request but ignored: {...}".
  std::vector<std::string> unknown_fields() const;

  std::vector<ValidationIssue>& issues() { return issues_; }
  // Throws ApiException(request_validation_error(issues)) when any fault was recorded.
  void throw_if_issues() const;

 private:
  const Json& body_;
  std::set<std::string> known_;
  std::vector<ValidationIssue> issues_;
};

// vLLM's server-log warning text for unknown fields (Python set repr, body order).
std::string ignored_fields_warning(const std::vector<std::string>& fields);

// A pydantic "missing" fault for a required field.
ValidationIssue missing_field_issue(const std::string& key, const Json& body);

}  // namespace fp4serve::server::openai
