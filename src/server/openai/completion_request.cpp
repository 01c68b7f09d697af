#include "server/openai/completion_request.h"

#include <limits>

#include "server/openai/client_json.h"
#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

namespace {

const Json* member(const Json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() ? nullptr : &*it;
}

[[noreturn]] void fail_before(const std::string& message, std::optional<std::string> parameter,
                              std::optional<std::string> value, const Json& body) {
  throw ApiException(request_validation_error(
      {before_validator_issue(message, std::move(parameter), std::move(value), body)}));
}

bool is_list_of_ints(const Json& v) { return is_strict_int_list(v); }

// --- CompletionRequest's model_validator(mode="before") functions -----------------------------

void validate_prompt_list_length(const Json& body, const ServerLimits& limits) {
  const Json* prompt = member(body, "prompt");
  if (prompt && prompt->is_array() && !prompt->empty() && !is_list_of_ints(*prompt) &&
      static_cast<int64_t>(prompt->size()) > limits.max_completion_prompts) {
    const std::string max = std::to_string(limits.max_completion_prompts);
    fail_before("prompt list length " + std::to_string(prompt->size()) +
                    " exceeds the maximum allowed count of " + max +
                    ". To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS environment variable.",
                "prompt", std::nullopt, body);
  }
}

void validate_prompt_and_prompt_embeds(const Json& body) {
  const Json* prompt = member(body, "prompt");
  const Json* embeds = member(body, "prompt_embeds");
  const bool prompt_empty = !prompt || prompt->is_null() || (prompt->is_string() && prompt->get_ref<const std::string&>().empty());
  const bool embeds_empty = !embeds || embeds->is_null() || (embeds->is_array() && embeds->empty());
  if (prompt_empty && embeds_empty) {
    fail_before("Either prompt or prompt_embeds must be provided and non-empty.", "prompt",
                std::nullopt, body);
  }
}

void check_logprobs(const Json& body) {
  if (const Json* ids = member(body, "logprob_token_ids"); ids && !ids->is_null() && ids->is_array()) {
    if (ids->empty()) {
      fail_before("`logprob_token_ids` must not be an empty list.", "logprob_token_ids", std::nullopt, body);
    }
    if (py_truthy(member(body, "use_beam_search"))) {
      fail_before("`logprob_token_ids` is not supported with beam search.", "logprob_token_ids",
                  std::nullopt, body);
    }
    const Json* mt = member(body, "max_tokens");
    if (py_truthy(member(body, "echo")) && mt && mt->is_number() && *mt == 0) {
      fail_before("`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` because "
                  "no output tokens are generated.",
                  "logprob_token_ids", std::nullopt, body);
    }
    const Json* lp = member(body, "logprobs");
    if (!lp || lp->is_null()) {
      fail_before("when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids",
                  std::nullopt, body);
    }
  }
  check_logprob_fields(body, "logprobs");
  if (const Json* lp = member(body, "logprobs"); lp && !lp->is_null()) {
    const double v = py_number(*lp);
    if (v < 0 && v != -1) {
      fail_before("`logprobs` must be a positive value or -1.", "logprobs", py_str(*lp), body);
    }
  }
}

// --- prompt: list[int>=0] | list[list[int>=0]] | str | list[str] | None -----------------------

void nonneg_int_list(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues,
                     std::vector<int64_t>* out) {
  if (!v.is_array()) {
    ValidationIssue i{"list_type", loc, "Input should be a valid list", v, std::nullopt, false, std::nullopt};
    issues.push_back(i);
    return;
  }
  for (std::size_t k = 0; k < v.size(); ++k) {
    Loc el = loc;
    el.push_back(std::to_string(k));
    auto x = coerce_int(v[k], el, issues);
    if (x && *x < 0) {
      issues.push_back(ValidationIssue{"greater_than_equal", el, "Input should be greater than or equal to 0",
                                       v[k], "{'ge': 0}", false, std::nullopt});
    } else if (x && out) {
      out->push_back(*x);
    }
  }
}

std::vector<int32_t> to_token_ids(const std::vector<int64_t>& ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id > std::numeric_limits<int32_t>::max()) {
      throw ApiException(value_error("Token id " + std::to_string(id) + " is out of vocabulary"));
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

[[noreturn]] void no_prompt() {
  throw ApiException(value_error("please provide at least one prompt"));
}

void read_prompt(BodyReader& reader, std::vector<CompletionPrompt>& prompts) {
  const Json* v = reader.raw("prompt");
  if (!v || v->is_null()) return;  // the before validator already refused a missing prompt
  if (v->is_string()) {
    prompts.push_back({v->get<std::string>(), {}});
    return;
  }
  // pydantic's smart union: branches in order, the first that validates wins.
  const Loc base{"body", "prompt"};
  std::vector<ValidationIssue> all;
  {  // list[int]
    std::vector<ValidationIssue> issues;
    std::vector<int64_t> ids;
    nonneg_int_list(*v, {"body", "prompt", "list[int]"}, issues, &ids);
    if (issues.empty()) {
      if (ids.empty()) no_prompt();
      prompts.push_back({std::nullopt, to_token_ids(ids)});
      return;
    }
    all.insert(all.end(), issues.begin(), issues.end());
  }
  {  // list[list[int]]
    std::vector<ValidationIssue> issues;
    std::vector<std::vector<int64_t>> lists;
    if (!v->is_array()) {
      issues.push_back({"list_type", {"body", "prompt", "list[list[int]]"}, "Input should be a valid list", *v,
                        std::nullopt, false, std::nullopt});
    } else {
      for (std::size_t k = 0; k < v->size(); ++k) {
        std::vector<int64_t> ids;
        nonneg_int_list((*v)[k], {"body", "prompt", "list[list[int]]", std::to_string(k)}, issues, &ids);
        lists.push_back(std::move(ids));
      }
    }
    if (issues.empty()) {
      if (lists.empty() || lists.front().empty()) no_prompt();
      for (const auto& ids : lists) prompts.push_back({std::nullopt, to_token_ids(ids)});
      return;
    }
    all.insert(all.end(), issues.begin(), issues.end());
  }
  all.push_back({"string_type", {"body", "prompt", "str"}, "Input should be a valid string", *v,
                 std::nullopt, false, std::nullopt});
  {  // list[str]
    std::vector<ValidationIssue> issues;
    auto texts = coerce_string_list(*v, {"body", "prompt", "list[str]"}, issues);
    if (issues.empty() && texts) {
      if (texts->empty()) no_prompt();
      for (auto& t : *texts) prompts.push_back({std::move(t), {}});
      return;
    }
    all.insert(all.end(), issues.begin(), issues.end());
  }
  auto& sink = reader.issues();
  sink.insert(sink.end(), all.begin(), all.end());
}

// prompt_embeds: bytes | list[bytes] | None (lax bytes take str). Any value is refused later
// (refuse_unsupported_common); this only gives a wrongly typed one pydantic's answer.
void read_prompt_embeds(BodyReader& reader) {
  const Json* v = reader.raw("prompt_embeds");
  if (!v || v->is_null() || v->is_string() || is_strict_string_list(*v)) return;
  auto& issues = reader.issues();
  issues.push_back({"bytes_type", {"body", "prompt_embeds", "bytes"}, "Input should be a valid bytes", *v,
                    std::nullopt, false, std::nullopt});
  if (!v->is_array()) {
    issues.push_back({"list_type", {"body", "prompt_embeds", "list[bytes]"}, "Input should be a valid list", *v,
                      std::nullopt, false, std::nullopt});
    return;
  }
  for (std::size_t k = 0; k < v->size(); ++k) {
    if ((*v)[k].is_string()) continue;
    issues.push_back({"bytes_type", {"body", "prompt_embeds", "list[bytes]", std::to_string(k)},
                      "Input should be a valid bytes", (*v)[k], std::nullopt, false, std::nullopt});
  }
}

}  // namespace

Json parse_json_body(std::string_view text, const char* model_class) {
  auto blank = text.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (blank) {
    // FastAPI passes no body at all to the model: a "missing" fault at ("body",).
    throw ApiException(request_validation_error(
        {ValidationIssue{"missing", {"body"}, "Field required", Json(nullptr), std::nullopt, false, std::nullopt}}));
  }
  // Nesting first, as json.loads hits its recursion limit before it reaches a later syntax error.
  if (auto at = find_excess_nesting(text)) {
    throw ApiException(body_parse_error(JsonNestingError(*at, kMaxJsonNestingDepth).what()));
  }
  Json body;
  try {
    body = Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e309
    // FastAPI: {'type': 'json_invalid', 'loc': ('body', e.pos), 'msg': 'JSON decode error',
    // 'input': {}, 'ctx': {'error': e.msg}}.
    const PythonJsonError err = python_json_decode_error(text, e);
    throw ApiException(request_validation_error({ValidationIssue{
        "json_invalid", {"body", std::to_string(err.pos)}, "JSON decode error", Json::object(),
        "{'error': " + py_str_repr(err.msg) + "}", false, std::nullopt}}));
  }
  if (!body.is_object()) {
    throw ApiException(request_validation_error({ValidationIssue{
        "model_type", {"body"},
        std::string("Input should be a valid dictionary or instance of ") + model_class, body,
        std::string("{'class_name': '") + model_class + "'}", false, std::nullopt}}));
  }
  return body;
}

CompletionRequest parse_completion_request(std::string_view body_text, const ServerLimits& limits) {
  return parse_completion_request(parse_json_body(body_text, "CompletionRequest"), limits);
}

namespace {

CompletionRequest parse_completion_body(const Json& body, const ServerLimits& limits) {
  if (!body.is_object()) {
    throw ApiException(request_validation_error({ValidationIssue{
        "model_type", {"body"}, "Input should be a valid dictionary or instance of CompletionRequest",
        body, "{'class_name': 'CompletionRequest'}", false, std::nullopt}}));
  }
  // model_validator(mode="before") functions, last-defined first (pydantic wraps each new one
  // around the previous ones).
  validate_prompt_list_length(body, limits);
  validate_prompt_and_prompt_embeds(body);
  check_stream_options(body);
  check_logprobs(body);
  check_structured_outputs_count(body, Endpoint::kCompletions);
  check_response_format(body);
  check_cache_salt(body);

  // Field validation.
  CompletionRequest req;
  BodyReader reader(body);
  read_common_fields(reader, Endpoint::kCompletions, req.common);
  read_prompt(reader, req.prompts);
  // normalize_null_max_tokens: null -> 16.
  req.max_tokens = reader.int_field("max_tokens").value_or(16);
  req.logprobs = reader.int_field("logprobs");
  reader.string_field("suffix");
  read_prompt_embeds(reader);
  reader.throw_if_issues();
  req.ignored_fields = reader.unknown_fields();

  // Serving: model, then what fp4serve cannot do.
  req.model_name = resolve_model_name(req.common, limits);
  refuse_unsupported_common(body, Endpoint::kCompletions);
  // The route answers once every prompt finished: a request without one would never be answered.
  if (req.prompts.empty()) no_prompt();
  return req;
}

}  // namespace

CompletionRequest parse_completion_request(const Json& body, const ServerLimits& limits) {
  try {
    return parse_completion_body(body, limits);
  } catch (const nlohmann::json::exception& e) {
    // A shape no check above foresaw: still a clear 400, never a crash.
    throw ApiException(value_error(std::string("Invalid request body: ") + e.what()));
  }
}

engine::SamplingParams to_sampling_params(const CompletionRequest& request, int64_t max_tokens,
                                          const DefaultSamplingParams& defaults,
                                          const ServerLimits& limits, bool* temperature_raised) {
  const int64_t effective = request.echo_without_generation() ? 1 : max_tokens;
  // vLLM: echo scores the prompt at the logprobs count unless prompt_logprobs is given.
  std::optional<int64_t> prompt_logprobs = request.common.prompt_logprobs;
  if (!prompt_logprobs && request.common.echo) prompt_logprobs = request.logprobs;
  return make_sampling_params(request.common, effective, request.logprobs, prompt_logprobs, defaults, limits,
                              temperature_raised);
}

}  // namespace fp4serve::server::openai
