#include "server/openai/request_common.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "engine/bad_words.h"
#include "server/openai/python_repr.h"
#include "server/openai/reasoning_parser.h"

namespace fp4serve::server::openai {

DefaultSamplingParams DefaultSamplingParams::from_generation_config(const GenerationConfig& config) {
  DefaultSamplingParams d;
  d.temperature = config.temperature;
  d.top_p = config.top_p;
  d.top_k = config.top_k;
  d.min_p = config.min_p;
  d.repetition_penalty = config.repetition_penalty;
  d.max_tokens = config.max_new_tokens;
  return d;
}

std::pair<bool, bool> should_include_usage(const std::optional<StreamOptions>& options,
                                           bool force_include_usage) {
  if (options) {
    const bool include = options->include_usage || force_include_usage;
    return {include, include && options->continuous_usage_stats};
  }
  return {force_include_usage, false};
}

double py_number(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return v.get<double>();
}

bool py_truthy(const Json* v) {
  if (!v) return false;
  switch (v->type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return v->get<bool>();
    case Json::value_t::number_integer: return v->get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return v->get<uint64_t>() != 0;
    case Json::value_t::number_float: return v->get<double>() != 0.0;
    case Json::value_t::string: return !v->get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !v->empty();
    default: return true;
  }
}

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

void add_issue(BodyReader& reader, const char* type, Loc loc, std::string msg, const Json& input,
               std::optional<std::string> ctx = std::nullopt) {
  reader.issues().push_back(make_issue(type, std::move(loc), std::move(msg), input, std::move(ctx)));
}

void check_ge(BodyReader& reader, const std::string& key, std::optional<int64_t> value, int64_t bound,
              const Json* raw) {
  if (value && *value < bound) {
    add_issue(reader, "greater_than_equal", {"body", key},
              "Input should be greater than or equal to " + std::to_string(bound), *raw,
              "{'ge': " + std::to_string(bound) + "}");
  }
}

// stop: str | list[str] | None. A string becomes a one-element list (SamplingParams.__post_init__).
void read_stop(BodyReader& reader, std::vector<std::string>& out) {
  const Json* v = reader.raw("stop");
  if (!v || v->is_null()) return;
  if (v->is_string()) {
    out = {v->get<std::string>()};
    return;
  }
  if (is_strict_string_list(*v)) {
    out = v->get<std::vector<std::string>>();
    return;
  }
  // pydantic reports one fault per union branch.
  std::vector<ValidationIssue>& issues = reader.issues();
  coerce_string(*v, {"body", "stop", "str"}, issues);
  coerce_string_list(*v, {"body", "stop", "list[str]"}, issues);
}

void read_stream_options(BodyReader& reader, std::optional<StreamOptions>& out) {
  const Json* v = reader.raw("stream_options");
  if (!v || v->is_null()) return;
  if (!v->is_object()) {
    add_issue(reader, "model_type", {"body", "stream_options"},
              "Input should be a valid dictionary or instance of StreamOptions", *v,
              "{'class_name': 'StreamOptions'}");
    return;
  }
  StreamOptions options;
  std::vector<ValidationIssue>& issues = reader.issues();
  if (auto it = v->find("include_usage"); it != v->end()) {
    // bool | None; None is falsy where vLLM tests it.
    if (it->is_null()) options.include_usage = false;
    else if (auto b = coerce_bool(*it, {"body", "stream_options", "include_usage"}, issues)) options.include_usage = *b;
  }
  if (auto it = v->find("continuous_usage_stats"); it != v->end() && !it->is_null()) {
    if (auto b = coerce_bool(*it, {"body", "stream_options", "continuous_usage_stats"}, issues)) {
      options.continuous_usage_stats = *b;
    }
  }
  out = options;
}

// thinking_token_budget: ThinkingTokenBudget, an int | None behind vLLM's BeforeValidator
// (sampling_params.py validate_thinking_token_budget), which sees the raw value: only a JSON
// integer passes (no bool, float or numeric string, unlike a plain int field), -1 means unset, and
// the fault is a VLLMValidationError that pydantic reports at the field.
std::optional<int64_t> read_thinking_token_budget(BodyReader& reader) {
  const Json* v = reader.raw("thinking_token_budget");
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    return static_cast<int64_t>(std::min<uint64_t>(u, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  }
  if (v->is_number_integer() && v->get<int64_t>() >= -1) {
    const int64_t b = v->get<int64_t>();
    return b == -1 ? std::nullopt : std::optional<int64_t>(b);
  }
  const std::string message = "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.";
  ValidationIssue issue;
  issue.type = "value_error";
  issue.loc = {"body", "thinking_token_budget"};
  issue.msg = "Value error, " + vllm_error_text(message, "thinking_token_budget", py_str(*v));
  issue.input = *v;
  issue.ctx_repr = "{'error': VLLMValidationError(" + py_str_repr(message) + ")}";
  issue.from_vllm_error = true;
  issue.vllm_parameter = "thinking_token_budget";
  reader.issues().push_back(std::move(issue));
  return std::nullopt;
}

}  // namespace

void read_common_fields(BodyReader& reader, Endpoint endpoint, CommonRequestFields& out) {
  const bool chat = endpoint == Endpoint::kChat;
  out.model = reader.string_field("model");
  out.frequency_penalty = reader.float_field("frequency_penalty");
  out.presence_penalty = reader.float_field("presence_penalty");
  out.temperature = reader.float_field("temperature");
  out.top_p = reader.float_field("top_p");
  out.min_p = reader.float_field("min_p");
  out.repetition_penalty = reader.float_field("repetition_penalty");
  out.top_k = reader.int_field("top_k");
  out.seed = reader.int_field("seed");
  // completions: `n: int = 1`; chat: `n: int | None = 1` (None means 1).
  out.n = reader.int_field("n", /*nullable=*/chat).value_or(1);
  if (auto bias = reader.float_dict_field("logit_bias")) out.logit_bias = std::move(*bias);
  read_stop(reader, out.stop);
  if (auto ids = reader.int_list_field("stop_token_ids")) out.stop_token_ids = std::move(*ids);
  out.include_stop_str_in_output = reader.bool_field("include_stop_str_in_output", false).value_or(false);
  out.ignore_eos = reader.bool_field("ignore_eos", false).value_or(false);
  out.min_tokens = reader.int_field("min_tokens", false).value_or(0);
  out.skip_special_tokens = reader.bool_field("skip_special_tokens", false).value_or(true);
  out.spaces_between_special_tokens =
      reader.bool_field("spaces_between_special_tokens", false).value_or(true);
  out.stream = reader.bool_field("stream").value_or(false);
  read_stream_options(reader, out.stream_options);

  out.truncate_prompt_tokens = reader.int_field("truncate_prompt_tokens");
  check_ge(reader, "truncate_prompt_tokens", out.truncate_prompt_tokens, -1, reader.raw("truncate_prompt_tokens"));
  if (const Json* side = reader.raw("truncation_side"); side && !side->is_null()) {
    if (side->is_string() && (*side == "left" || *side == "right")) {
      out.truncation_side = side->get<std::string>();
    } else {
      add_issue(reader, "literal_error", {"body", "truncation_side"}, "Input should be 'left' or 'right'",
                *side, "{'expected': \"'left' or 'right'\"}");
    }
  }
  out.add_special_tokens = reader.bool_field("add_special_tokens", false).value_or(!chat);
  out.priority = reader.int_field("priority", false).value_or(0);
  out.request_id = reader.string_field("request_id", false);
  out.user = reader.string_field("user");
  out.cache_salt = reader.string_field("cache_salt");
  out.return_tokens_as_token_ids = reader.bool_field("return_tokens_as_token_ids");
  out.return_token_ids = reader.bool_field("return_token_ids").value_or(false);
  out.stream_interval = reader.int_field("stream_interval");
  check_ge(reader, "stream_interval", out.stream_interval, 1, reader.raw("stream_interval"));
  out.echo = reader.bool_field("echo", /*nullable=*/!chat).value_or(false);
  out.best_of = reader.int_field("best_of");

  // Fields read for their type only; refuse_unsupported_common decides what to do with them.
  reader.bool_field("use_beam_search", false);
  reader.float_field("length_penalty", false);
  reader.bool_field("watermarking");
  out.prompt_logprobs = reader.int_field("prompt_logprobs");
  if (auto words = reader.string_list_field("bad_words", false)) out.bad_words = std::move(*words);
  out.logprob_token_ids = reader.int_list_field("logprob_token_ids");
  out.allowed_token_ids = reader.int_list_field("allowed_token_ids");
  reader.string_field("session_id");
  reader.bool_field("return_token_offsets");
  reader.bool_field("return_mm_kwargs", false);
  reader.int_field("routed_experts_prompt_start", false);
  out.thinking_token_budget = read_thinking_token_budget(reader);
  reader.object_field("kv_transfer_params");
  reader.object_field("ec_transfer_params");
  reader.object_field("vllm_xargs");
  reader.raw("repetition_detection");
  out.response_format = read_response_format(reader);
  out.structured_outputs = read_structured_outputs(reader);
}

void check_cache_salt(const Json& body) {
  const Json* salt = member(body, "cache_salt");
  if (!salt || salt->is_null()) return;
  if (!salt->is_string() || salt->get_ref<const std::string&>().empty()) {
    fail_before("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt",
                std::nullopt, body);
  }
  const std::string& s = salt->get_ref<const std::string&>();
  const bool forbidden = s.find_first_of(std::string("@/\\\0", 4)) != std::string::npos;
  if (py_len(s) > 128 || forbidden) {
    fail_before("Parameter 'cache_salt' must be at most 128 characters and must not contain '@', "
                "'/', '\\\\', or NUL.",
                "cache_salt", std::nullopt, body);
  }
}

void check_response_format(const Json& body) {
  const Json* rf = member(body, "response_format");
  if (!rf || !rf->is_object()) return;
  auto type = rf->find("type");
  if (type != rf->end() && *type == "json_schema") {
    auto schema = rf->find("json_schema");
    if (schema == rf->end() || schema->is_null()) {
      fail_before("When response_format type is 'json_schema', the 'json_schema' field must be provided.",
                  "response_format", std::nullopt, body);
    }
  }
}

void check_structured_outputs_count(const Json& body, Endpoint endpoint) {
  const Json* so = member(body, "structured_outputs");
  if (!so || !so->is_object()) return;
  int count = 0;
  for (const char* k : {"json", "regex", "choice"}) {
    auto it = so->find(k);
    if (it != so->end() && !it->is_null()) ++count;
  }
  if (count > 1) {
    fail_before("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').",
                endpoint == Endpoint::kCompletions ? std::optional<std::string>("structured_outputs")
                                                   : std::nullopt,
                std::nullopt, body);
  }
  if (endpoint == Endpoint::kChat && count > 0) {
    const Json* tc = member(body, "tool_choice");
    const bool plain = !tc || (tc->is_string() && (*tc == "none" || *tc == "auto" || *tc == "required"));
    if (!plain) {
      fail_before("You can only either use constraints for structured outputs or tools, not both.",
                  std::nullopt, std::nullopt, body);
    }
  }
}

void check_stream_options(const Json& body) {
  if (py_truthy(member(body, "stream_options")) && !py_truthy(member(body, "stream"))) {
    fail_before("Stream options can only be defined when `stream=True`.", "stream_options",
                std::nullopt, body);
  }
}

void check_logprob_fields(const Json& body, const char* top_field) {
  for (const char* field : {"prompt_logprobs", top_field}) {
    const Json* v = member(body, field);
    if (v && !v->is_null() && !v->is_number() && !v->is_boolean()) {
      fail_before(std::string("`") + field + "` must be an integer.", std::string(field), py_str(*v), body);
    }
  }
  if (const Json* pl = member(body, "prompt_logprobs"); pl && !pl->is_null()) {
    const double v = py_number(*pl);
    if (py_truthy(member(body, "stream")) && (v > 0 || v == -1)) {
      fail_before("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs",
                  std::nullopt, body);
    }
    if (v < 0 && v != -1) {
      fail_before("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs", py_str(*pl), body);
    }
  }
}

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& what) {
  throw ApiException(vllm_validation_error(what, field));
}

bool is_set(const Json& body, const char* key) {
  const Json* v = member(body, key);
  return v && !v->is_null();
}

}  // namespace

void refuse_unsupported_common(const Json& body, Endpoint endpoint) {
  if (py_truthy(member(body, "use_beam_search"))) {
    refuse("use_beam_search", "Beam search is not supported by fp4serve.");
  }
  if (py_truthy(member(body, "watermarking"))) {
    refuse("watermarking", "Watermarking is not supported by fp4serve.");
  }
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    if (is_set(body, key)) {
      refuse(key, std::string("`") + key +
                      "` was removed from vLLM in v0.12.0 and is not supported by fp4serve; use "
                      "`structured_outputs` or `response_format`.");
    }
  }
  if (is_set(body, "repetition_detection")) {
    refuse("repetition_detection", "`repetition_detection` is not supported by fp4serve.");
  }
  for (const char* key : {"kv_transfer_params", "ec_transfer_params"}) {
    if (is_set(body, key)) {
      refuse(key, std::string("`") + key + "` (disaggregated serving) is not supported by fp4serve.");
    }
  }
  if (endpoint == Endpoint::kCompletions) {
    // vLLM's renderer refuses suffix for every model (no FIM support): create_error_response, a
    // plain 400 without param [vllm: renderers/online_renderer.py render_completion].
    if (is_set(body, "suffix")) throw ApiException(value_error("suffix is not currently supported"));
    if (is_set(body, "prompt_embeds")) {  // even "" or {}: without a prompt nothing would be generated
      refuse("prompt_embeds", "`prompt_embeds` is not supported by fp4serve.");
    }
  }
}

std::string resolve_model_name(const CommonRequestFields& fields, const ServerLimits& limits) {
  const std::string fallback = limits.served_model_names.empty() ? "" : limits.served_model_names.front();
  if (!fields.model || fields.model->empty()) return fallback;
  for (const auto& name : limits.served_model_names) {
    if (name == *fields.model) return name;
  }
  throw ApiException(model_not_found(*fields.model));
}

namespace {

// Python int(str) for logit_bias keys (SamplingParams.from_optional does int(token)).
std::optional<int64_t> python_int(const std::string& text) {
  std::size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::string s = text.substr(b, e - b);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  std::size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i >= s.size()) return std::nullopt;
  for (std::size_t k = i; k < s.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(s[k]))) return std::nullopt;
  }
  try {
    return std::stoll(s);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> sampling_error_value(const engine::SamplingParamsError& error,
                                                const engine::SamplingParams& p) {
  if (error.value) return error.value;
  const std::string& param = error.parameter;
  if (param == "temperature") return engine::python_float_repr(p.temperature);
  if (param == "top_p") return engine::python_float_repr(p.top_p);
  if (param == "max_tokens" && p.max_tokens) return std::to_string(*p.max_tokens);
  if (param == "logprobs") {
    const std::string prefix = "Requested sample logprobs of ";
    if (error.message.rfind(prefix, 0) == 0) {
      return error.message.substr(prefix.size(), error.message.find(',') - prefix.size());
    }
    if (p.logprobs) return std::to_string(*p.logprobs);
  }
  if (param == "prompt_logprobs") {
    const std::string prefix = "Requested prompt logprobs of ";
    if (error.message.rfind(prefix, 0) == 0) {
      return error.message.substr(prefix.size(), error.message.find(',') - prefix.size());
    }
    if (p.prompt_logprobs) return std::to_string(*p.prompt_logprobs);
  }
  if (param == "bad_words") return py_str(Json(p.bad_words));
  if (param == "logit_bias") {
    const std::string prefix = "token_id(s) ";
    const auto end = error.message.find(" in logit_bias");
    if (error.message.rfind(prefix, 0) == 0 && end != std::string::npos) {
      return error.message.substr(prefix.size(), end - prefix.size());
    }
  }
  return std::nullopt;
}

engine::SamplingParams make_sampling_params(const CommonRequestFields& f, int64_t max_tokens,
                                            std::optional<int64_t> logprobs,
                                            std::optional<int64_t> prompt_logprobs,
                                            const DefaultSamplingParams& d,
                                            const ServerLimits& limits, bool* temperature_raised) {
  engine::SamplingParams p;
  p.n = f.n;
  p.repetition_penalty = f.repetition_penalty.value_or(d.repetition_penalty.value_or(1.0));
  p.presence_penalty = f.presence_penalty.value_or(0.0);
  p.frequency_penalty = f.frequency_penalty.value_or(0.0);
  p.temperature = f.temperature.value_or(d.temperature.value_or(1.0));
  p.top_p = f.top_p.value_or(d.top_p.value_or(1.0));
  p.top_k = f.top_k.value_or(d.top_k.value_or(0));
  p.min_p = f.min_p.value_or(d.min_p.value_or(0.0));
  p.seed = f.seed;
  p.stop = f.stop;
  // Server-default stop ids are merged after the request's, first occurrence kept.
  p.stop_token_ids = f.stop_token_ids;
  if (!d.stop_token_ids.empty()) {
    if (p.stop_token_ids.empty()) {
      p.stop_token_ids = d.stop_token_ids;
    } else {
      for (int64_t id : d.stop_token_ids) {
        if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) == p.stop_token_ids.end()) {
          p.stop_token_ids.push_back(id);
        }
      }
    }
  }
  p.include_stop_str_in_output = f.include_stop_str_in_output;
  p.ignore_eos = f.ignore_eos;
  p.max_tokens = max_tokens;
  p.min_tokens = f.min_tokens;
  // chat: top_logprobs if logprobs and not logprob_token_ids; completions: None if
  // logprob_token_ids else logprobs.
  p.logprobs = f.logprob_token_ids ? std::nullopt : logprobs;
  p.logprob_token_ids = f.logprob_token_ids;
  p.prompt_logprobs = prompt_logprobs;
  p.bad_words = f.bad_words;
  p.allowed_token_ids = f.allowed_token_ids;
  p.thinking_token_budget = f.thinking_token_budget;
  // to_sampling_params' extract_structured_outputs (before SamplingParams checks its fields).
  const std::optional<RequestStructuredOutputs> structured = merge_response_format(f.structured_outputs, f.response_format);
  for (const auto& [key, bias] : f.logit_bias) {
    auto id = python_int(key);
    if (!id) {
      throw ApiException(value_error("invalid literal for int() with base 10: " + py_str_repr(key)));
    }
    p.logit_bias[*id] = bias;
  }
  if (auto err = engine::prepare_sampling_params(p, limits.sampling, temperature_raised)) {
    if (err->parameter.empty()) throw ApiException(value_error(err->message));
    throw ApiException(vllm_validation_error(err->message, err->parameter, sampling_error_value(*err, p)));
  }
  // The InputProcessor's structured-output check (validate_xgrammar_grammar).
  if (structured) p.structured_outputs = to_engine_structured_outputs(*structured);
  // The engine's own admission checks (vLLM V1 Processor / InputProcessor).
  if (f.best_of && *f.best_of > 1) throw ApiException(value_error("vLLM V1 does not yet support best_of."));
  if (f.priority != 0 && !limits.priority_scheduling) {
    throw ApiException(value_error("Got priority " + std::to_string(f.priority) +
                                   " but Priority scheduling is not enabled."));
  }
  return p;
}

int64_t response_top_logprobs(const CommonRequestFields& fields, int64_t requested) {
  return fields.logprob_token_ids ? std::numeric_limits<int64_t>::max() : requested;
}

void resolve_bad_words(engine::SamplingParams& params, const tokenizer::Tokenizer& tokenizer) {
  if (auto err = engine::tokenize_bad_words(params, tokenizer)) {
    throw ApiException(vllm_validation_error(err->message, err->parameter, sampling_error_value(*err, params)));
  }
}

void resolve_reasoning_markers(engine::SamplingParams& params, const tokenizer::Tokenizer& tokenizer,
                               bool gate_structured_outputs) {
  const bool gate = gate_structured_outputs && params.structured_outputs;
  if (!params.thinking_token_budget && !gate) return;
  params.reasoning_start_ids = tokenizer.encode(kQwen3ReasoningStart, /*add_special_tokens=*/false);
  params.reasoning_end_ids = tokenizer.encode(kQwen3ReasoningEnd, /*add_special_tokens=*/false);
  if (params.reasoning_start_ids.empty() || params.reasoning_end_ids.empty()) {
    throw ApiException(value_error("ReasoningConfig: failed to tokenize reasoning strings: reasoning_start_str='" +
                                   std::string(kQwen3ReasoningStart) + "', reasoning_end_str='" +
                                   std::string(kQwen3ReasoningEnd) +
                                   "'. Ensure the strings are valid tokens in the model's vocabulary."));
  }
}

}  // namespace fp4serve::server::openai
