// The error answers of the OpenAI-compatible API, as vLLM sends them (docs/vllm-surface.md §1.10):
// the envelope {"error":{"message","type","param","code"}} and the three ways vLLM words a fault.
//
//  1. A VLLMValidationError / ValueError raised while serving (create_error_response(exc)): HTTP 400,
//     type "BadRequestError", message str(exc). VLLMValidationError.__str__ appends
//     " (parameter=P, value=V)", and that suffix is on the wire, e.g.
//     "You passed 98305 input tokens ... Please reduce the length of the input prompt.
//      (parameter=input_tokens, value=98305)" with "param":"input_tokens".
//  2. Request-body validation by pydantic (wrong types, missing fields, malformed JSON, and the
//     model_validator(mode="before") checks, which pydantic wraps as "value_error"): HTTP 400,
//     type "Bad Request" (HTTPStatus.BAD_REQUEST.phrase), message "N validation error(s):\n  {...}"
//     with one Python dict repr per error, param = the VLLMValidationError's parameter or the
//     cleaned dotted loc of the first error ("body.temperature").
//     [vllm: entrypoints/serve/exception_handling/handlers/validation.py]
//  3. Fixed texts: unknown model (404 NotFoundError), NotImplementedError (501), engine errors
//     (500 InternalServerError "Internal server error").
#pragma once

#include <optional>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/message_sanitizer.h"  // sanitize_message, echo_input: every message passes through

namespace fp4serve::server::openai {

struct ApiError {
  int status = 400;                   // HTTP status; also the envelope's "code"
  std::string type = "BadRequestError";
  std::string message;
  std::optional<std::string> param;   // null in the envelope when absent

  nlohmann::ordered_json to_json() const;  // {"error":{"message","type","param","code"}}
  std::string body() const;                // compact JSON text, as starlette's JSONResponse
};

// Thrown by the request parsers; carries the finished answer.
class ApiException : public std::runtime_error {
 public:
  explicit ApiException(ApiError error) : std::runtime_error(error.message), error_(std::move(error)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

// str(VLLMValidationError(message, parameter=..., value=...)): the message plus
// " (parameter=P, value=V)" for the parts that are set. `value` is already Python's str(value).
std::string vllm_error_text(const std::string& message, const std::optional<std::string>& parameter,
                            const std::optional<std::string>& value);

// Way 1: a VLLMValidationError raised while serving.
ApiError vllm_validation_error(const std::string& message,
                               const std::optional<std::string>& parameter = std::nullopt,
                               const std::optional<std::string>& value = std::nullopt);
// Way 1 for a plain ValueError/TypeError (no parameter): 400 BadRequestError, param null.
ApiError value_error(const std::string& message);

// The offending value of an issue as vLLM's message prints it (_summarize_error_input: strings cut at
// 200 characters with "...[truncated]", containers described by their size, scalars str()'d),
// summarized when the issue is made, so an issue never holds a copy of client data (for the
// model_validator(mode="before") faults that would be the whole body).
class ErrorInputSummary {
 public:
  ErrorInputSummary() : ErrorInputSummary(nlohmann::ordered_json()) {}
  ErrorInputSummary(const nlohmann::ordered_json& value);  // NOLINT: implicit, issues are built from values
  // Anything a JSON value is made from ("hot", 3, a std::string), as aggregate initializers pass it.
  template <class T, class = std::enable_if_t<!std::is_same_v<std::decay_t<T>, nlohmann::ordered_json> &&
                                              !std::is_same_v<std::decay_t<T>, ErrorInputSummary> &&
                                              std::is_constructible_v<nlohmann::ordered_json, const T&>>>
  ErrorInputSummary(const T& value) : ErrorInputSummary(nlohmann::ordered_json(value)) {}  // NOLINT
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// One pydantic error (exc.errors() entry). `loc` is the raw location ("body", "stop", "1"...);
// the message prints it cleaned (dotted, pydantic's union-branch markers such as "str" or
// "list[int]" dropped), as vLLM's handler does.
struct ValidationIssue {
  std::string type;                       // "int_parsing", "missing", "value_error", ...
  std::vector<std::string> loc;
  std::string msg;
  ErrorInputSummary input;                // the offending value as json.loads gave it, summarized
  std::optional<std::string> ctx_repr;    // Python repr of the ctx dict, when pydantic sets one
  bool from_vllm_error = false;           // ctx.error is a VLLMValidationError
  std::optional<std::string> vllm_parameter;
};

// Way 2: the answer for a list of pydantic errors (at least one).
ApiError request_validation_error(const std::vector<ValidationIssue>& issues);

// A model_validator(mode="before") that raised VLLMValidationError(message, parameter, value):
// pydantic turns it into a "value_error" issue at loc ("body",) whose input is the whole body.
ValidationIssue before_validator_issue(const std::string& message,
                                       const std::optional<std::string>& parameter,
                                       const std::optional<std::string>& value,
                                       const nlohmann::ordered_json& body);

// The cleaned dotted path of a loc (clean_loc_for_param).
std::string clean_loc(const std::vector<std::string>& loc);


// Way 3.
ApiError model_not_found(const std::string& model);               // 404, param "model"
ApiError not_implemented(const std::string& message);             // 501 NotImplementedError
ApiError internal_server_error(const std::string& message = "Internal server error");  // 500
// A body FastAPI could not parse for a reason other than a JSON syntax error (its HTTPException
// "There was an error parsing the body", which vLLM's handler wraps as type "Bad Request"); `why`
// is appended, since ours are specific (nesting too deep).
ApiError body_parse_error(const std::string& why);

}  // namespace fp4serve::server::openai
