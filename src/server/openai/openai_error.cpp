#include "server/openai/openai_error.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json err;
  err["message"] = message;
  err["type"] = type;
  err["param"] = param ? nlohmann::ordered_json(*param) : nlohmann::ordered_json(nullptr);
  err["code"] = status;
  nlohmann::ordered_json out;
  out["error"] = std::move(err);
  return out;
}

std::string ApiError::body() const {
  return to_json().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string vllm_error_text(const std::string& message, const std::optional<std::string>& parameter,
                            const std::optional<std::string>& value) {
  std::string extras;
  if (parameter) extras = "parameter=" + *parameter;
  if (value) extras += (extras.empty() ? "" : ", ") + std::string("value=") + *value;
  return extras.empty() ? message : message + " (" + extras + ")";
}

ApiError vllm_validation_error(const std::string& message,
                               const std::optional<std::string>& parameter,
                               const std::optional<std::string>& value) {
  return ApiError{400, "BadRequestError", sanitize_message(vllm_error_text(message, parameter, value)), parameter};
}

ApiError value_error(const std::string& message) {
  return ApiError{400, "BadRequestError", sanitize_message(message), std::nullopt};
}

namespace {

// pydantic-core's internal schema-kind names that vLLM drops from locs (_INTERNAL_LOC_MARKERS),
// plus anything bracketed ("list[str]", "function-wrap[...]").
bool is_internal_loc_segment(const std::string& segment) {
  static const std::array<const char*, 30> kMarkers = {
      "function-wrap", "function-after", "function-before", "function-plain", "json-or-python",
      "lax-or-strict", "chain", "default", "nullable", "tagged-union", "union", "call",
      "arguments", "is-instance", "is-subclass", "callable", "str", "int", "float", "bool",
      "bytes", "bytearray", "list", "tuple", "dict", "set", "frozenset", "complex", "none",
      "nonetype"};
  if (segment.find_first_of("[]{}()") != std::string::npos) return true;
  std::string lower = segment;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(kMarkers.begin(), kMarkers.end(),
                     [&](const char* m) { return lower == m; });
}

std::string join_dotted(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '.';
    out += parts[i];
  }
  return out;
}

// Keeps the first `max_chars` code points of UTF-8 text.
std::string truncate_code_points(const std::string& text, std::size_t max_chars, bool* truncated) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
      if (count == max_chars) {
        *truncated = true;
        return text.substr(0, i);
      }
      ++count;
    }
  }
  *truncated = false;
  return text;
}

// _format_error: str() of the error dict with loc cleaned and input summarized, cut at 1000.
std::string format_issue(const ValidationIssue& issue) {
  constexpr std::size_t kMaxErrorChars = 1000;
  std::string text = "{'type': " + py_str_repr(issue.type) +
                     ", 'loc': " + py_str_repr(clean_loc(issue.loc)) +
                     ", 'msg': " + py_str_repr(issue.msg) +
                     ", 'input': " + py_str_repr(issue.input.text());
  if (issue.ctx_repr) text += ", 'ctx': " + *issue.ctx_repr;
  text += "}";
  bool cut = false;
  std::string kept = truncate_code_points(text, kMaxErrorChars, &cut);
  return cut ? kept + "...[truncated]" : kept;
}

}  // namespace

ErrorInputSummary::ErrorInputSummary(const nlohmann::ordered_json& value) {
  constexpr std::size_t kMaxInputChars = 200;
  if (value.is_array()) {
    text_ = "<list of " + std::to_string(value.size()) + " items>";
    return;
  }
  if (value.is_object()) {
    text_ = "<dict of " + std::to_string(value.size()) + " items>";
    return;
  }
  bool cut = false;
  // A string is its own str(); cut it before anything copies it whole.
  text_ = truncate_code_points(value.is_string() ? value.get_ref<const std::string&>() : py_str(value),
                               kMaxInputChars, &cut);
  if (cut) text_ += "...[truncated]";
}

std::string clean_loc(const std::vector<std::string>& loc) {
  std::vector<std::string> parts;
  for (const auto& p : loc) {
    if (!is_internal_loc_segment(p)) parts.push_back(p);
  }
  return parts.empty() ? join_dotted(loc) : join_dotted(parts);
}

ApiError request_validation_error(const std::vector<ValidationIssue>& issues) {
  constexpr std::size_t kMaxReportedErrors = 10;
  ApiError err{400, "Bad Request", "Validation error", std::nullopt};
  bool param_from_vllm = false;
  for (const auto& issue : issues) {
    if (issue.from_vllm_error) {
      err.param = issue.vllm_parameter;
      param_from_vllm = true;
      break;
    }
  }
  if (!err.param && !issues.empty() && !issues.front().loc.empty()) {
    err.param = clean_loc(issues.front().loc);
  }
  (void)param_from_vllm;
  if (issues.empty()) return err;
  const std::size_t count = issues.size();
  const std::string label = count == 1 ? "error" : "errors";
  std::string message = std::to_string(count) + " validation " + label + ":\n";
  const std::size_t reported = std::min(count, kMaxReportedErrors);
  for (std::size_t i = 0; i < reported; ++i) message += "  " + format_issue(issues[i]) + "\n";
  if (count > reported) {
    message += "  ...and " + std::to_string(count - reported) + " more " + label + "\n";
  }
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
    message.pop_back();
  }
  err.message = sanitize_message(message);
  return err;
}

ValidationIssue before_validator_issue(const std::string& message,
                                       const std::optional<std::string>& parameter,
                                       const std::optional<std::string>& value,
                                       const nlohmann::ordered_json& body) {
  ValidationIssue issue;
  issue.type = "value_error";
  issue.loc = {"body"};
  issue.msg = "Value error, " + vllm_error_text(message, parameter, value);
  issue.input = body;
  // repr() of the exception prints its args, i.e. the message without the str() suffix.
  issue.ctx_repr = "{'error': VLLMValidationError(" + py_str_repr(message) + ")}";
  issue.from_vllm_error = true;
  issue.vllm_parameter = parameter;
  return issue;
}

ApiError model_not_found(const std::string& model) {
  return ApiError{404, "NotFoundError", sanitize_message("The model `" + echo_input(model) + "` does not exist."),
                  std::string("model")};
}

ApiError not_implemented(const std::string& message) {
  return ApiError{501, "NotImplementedError", sanitize_message(message), std::nullopt};
}

ApiError body_parse_error(const std::string& why) {
  return ApiError{400, "Bad Request", "There was an error parsing the body: " + why, std::nullopt};
}

ApiError internal_server_error(const std::string& message) {
  return ApiError{500, "InternalServerError", message, std::nullopt};
}

}  // namespace fp4serve::server::openai
