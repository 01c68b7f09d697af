// What /v1/completions and /v1/chat/completions share: the sampling fields, stream options, the
// vLLM extensions, the fields fp4serve refuses, and the mapping to engine::SamplingParams with
// vLLM's precedence (request value -> server default from generation_config.json -> OpenAI
// default) [vllm: completion/protocol.py, chat_completion/protocol.py `to_sampling_params`].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/generation_config.h"
#include "engine/sampling_params.h"
#include "server/openai/request_fields.h"
#include "server/openai/structured_outputs_request.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::server::openai {

// Server-side facts the validators need.
struct ServerLimits {
  std::vector<std::string> served_model_names;  // --served-model-name (first = the default)
  int64_t max_model_len = 0;
  engine::SamplingLimits sampling;              // vocab size, --max-logprobs, VLLM_MAX_N_SEQUENCES
  // VLLM_MAX_COMPLETION_PROMPTS. vLLM's default was not pinned down (see report); 1024 here.
  int64_t max_completion_prompts = 1024;
  bool priority_scheduling = false;             // --scheduling-policy priority
  bool enable_auto_tool_choice = false;         // --enable-auto-tool-choice (+ a tool parser)
  bool trust_request_chat_template = false;     // --trust-request-chat-template
};

// vLLM's default_sampling_params (ModelConfig.get_diff_sampling_param): the keys of
// generation_config.json vLLM uses, unless --generation-config vllm.
struct DefaultSamplingParams {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<int64_t> max_tokens;          // generation_config max_new_tokens
  std::vector<int64_t> stop_token_ids;        // server-default stop ids merged into the request's

  static DefaultSamplingParams from_generation_config(const GenerationConfig& config);
};

struct StreamOptions {
  // docs/vllm-surface.md §1.9: StreamOptions.include_usage defaults to true in the vLLM releases
  // fp4serve follows, so "stream_options": {} turns the usage chunk on. (Some 2026 snapshots default it
  // to false.)
  bool include_usage = true;
  bool continuous_usage_stats = false;
};

// should_include_usage(stream_options, --enable-force-include-usage).
std::pair<bool, bool> should_include_usage(const std::optional<StreamOptions>& options,
                                           bool force_include_usage);

struct CommonRequestFields {
  std::optional<std::string> model;
  // Sampling (nullopt = not in the request).
  std::optional<double> temperature, top_p, min_p, presence_penalty, frequency_penalty,
      repetition_penalty;
  std::optional<int64_t> top_k, seed;
  int64_t n = 1;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  std::vector<std::pair<std::string, double>> logit_bias;  // keys as sent; int() at mapping time
  std::optional<int64_t> prompt_logprobs;  // -1 = whole vocabulary
  std::vector<std::string> bad_words;
  std::optional<std::vector<int64_t>> allowed_token_ids;
  std::optional<std::vector<int64_t>> logprob_token_ids;  // logprobs of these ids instead of a top-N
  std::optional<int64_t> thinking_token_budget;            // -1 (unlimited) is read as unset
  // Structured output (structured_outputs_request.h): merged and checked by make_sampling_params.
  std::optional<RequestStructuredOutputs> structured_outputs;
  std::optional<RequestResponseFormat> response_format;
  // Streaming.
  bool stream = false;
  std::optional<StreamOptions> stream_options;
  // Extensions.
  std::optional<int64_t> truncate_prompt_tokens;  // -1 = max input length
  std::optional<std::string> truncation_side;     // "left" | "right"
  bool add_special_tokens = true;                 // completions true, chat false
  int64_t priority = 0;
  std::optional<std::string> request_id;          // the body's request_id
  std::optional<std::string> user;
  std::optional<std::string> cache_salt;
  std::optional<bool> return_tokens_as_token_ids;
  bool return_token_ids = false;
  std::optional<int64_t> stream_interval;         // accepted; a batching hint only
  bool echo = false;
  std::optional<int64_t> best_of;  // vLLM V1 refuses best_of > 1
};

enum class Endpoint { kCompletions, kChat };

// Reads the shared fields (pydantic field validation; faults are collected in the reader).
void read_common_fields(BodyReader& reader, Endpoint endpoint, CommonRequestFields& out);

// A raw JSON number as Python compares it (bools are ints); call only on numbers and bools.
double py_number(const Json& value);

// Python truthiness of a raw JSON value (the "before" validators test raw data with it).
bool py_truthy(const Json* value);

// The model_validator(mode="before") checks both endpoints have, one function each because the
// two request classes run them in different orders (pydantic runs "before" validators last-defined
// first). Each throws ApiException (a pydantic "value_error" 400).
void check_cache_salt(const Json& body);
void check_response_format(const Json& body);
void check_structured_outputs_count(const Json& body, Endpoint endpoint);
void check_stream_options(const Json& body);
// check_logprobs' shared part: `field` must be numeric; prompt_logprobs rules.
void check_logprob_fields(const Json& body, const char* top_field);

// Refuses what fp4serve cannot do instead of ignoring it (beam search, the removed guided_*
// fields, disaggregated serving, ...). Throws ApiException with a 400 that names the field.
void refuse_unsupported_common(const Json& body, Endpoint endpoint);

// The served model name: empty/absent = the first served name; unknown -> 404 (vLLM _check_model).
std::string resolve_model_name(const CommonRequestFields& fields, const ServerLimits& limits);

// to_sampling_params + SamplingParams.from_optional + vLLM's validation (prepare_sampling_params)
// + the engine-side checks (priority). `logprobs` is the engine's top-N (completions: logprobs;
// chat: top_logprobs when logprobs=true), dropped when the request names logprob_token_ids (vLLM
// passes logprobs=None then); `prompt_logprobs` the prompt's (the request's field, or with echo the
// logprobs count, as each endpoint decides). Throws ApiException carrying vLLM's message and param.
engine::SamplingParams make_sampling_params(const CommonRequestFields& fields, int64_t max_tokens,
                                            std::optional<int64_t> logprobs,
                                            std::optional<int64_t> prompt_logprobs,
                                            const DefaultSamplingParams& defaults,
                                            const ServerLimits& limits,
                                            bool* temperature_raised = nullptr);

// The engine's InputProcessor step for bad_words: tokenize_bad_words (engine/bad_words.h), its
// refusals as vLLM's 400 (VLLMValidationError with the words as the value).
void resolve_bad_words(engine::SamplingParams& params, const tokenizer::Tokenizer& tokenizer);

// The number of top logprobs a response lists per token: every entry of the token's dict (the
// sampled token and the named ids) when the request names logprob_token_ids, else `requested`
// (vLLM's return_all / `logprob_token_ids or ...` in the response builders).
int64_t response_top_logprobs(const CommonRequestFields& fields, int64_t requested);

// The reasoning parser's start and end strings (qwen3: "<think>", "</think>") as token ids, encoded
// without special tokens, as vLLM's ReasoningConfig.initialize_token_ids does. They serve a
// thinking_token_budget, and `gate_structured_outputs` (a reasoning parser is on and the request's
// constraint must wait for the reasoning to end, vLLM's reasoning_ended = False/None) asks for them
// for a structured-output request too: the engine then constrains only after the end marker (or
// at once when the prompt closed the block). Otherwise a no-op.
void resolve_reasoning_markers(engine::SamplingParams& params, const tokenizer::Tokenizer& tokenizer,
                               bool gate_structured_outputs = false);

// Python's str() of the value vLLM attaches to a sampling error (for the " (parameter=, value=)"
// suffix), or nullopt when vLLM attaches none.
std::optional<std::string> sampling_error_value(const engine::SamplingParamsError& error,
                                                const engine::SamplingParams& params);

}  // namespace fp4serve::server::openai
