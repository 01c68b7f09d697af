// POST /v1/completions: the body -> a typed, validated CompletionRequest, with vLLM's checks in
// vLLM's order [vllm: entrypoints/openai/completion/protocol.py CompletionRequest, serving.py]:
// pydantic "before" validators (last-defined first), field types, the model name, then what
// fp4serve refuses. Token counts are checked later (prompt_length.h) once the prompt is tokenized.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/request_common.h"

namespace fp4serve::server::openai {

// One prompt of a completion request: text, or token ids given directly.
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;  // when !text
};

struct CompletionRequest {
  CommonRequestFields common;
  std::string model_name;                 // resolved served name (for the response's "model")
  std::vector<CompletionPrompt> prompts;  // a list prompt is several requests (choices in order)
  int64_t max_tokens = 16;                // null is normalised back to 16 as vLLM does
  std::optional<int64_t> logprobs;        // top-N per generated token; -1 = whole vocabulary
  std::vector<std::string> ignored_fields;  // unknown keys: log ignored_fields_warning()

  bool echo_without_generation() const { return common.echo && max_tokens == 0; }
  // The output length the renderer checks the prompt against (max_tokens or 0).
  int64_t max_output_tokens() const { return max_tokens; }
};

// Throws ApiException (400 / 404) with vLLM's answer.
CompletionRequest parse_completion_request(const Json& body, const ServerLimits& limits);
// From the raw HTTP body: malformed JSON gets FastAPI's json_invalid answer.
CompletionRequest parse_completion_request(std::string_view body_text, const ServerLimits& limits);
// (A std::string is raw text too; without this overload it would be ambiguous with Json.)
inline CompletionRequest parse_completion_request(const std::string& body_text, const ServerLimits& limits) {
  return parse_completion_request(std::string_view(body_text), limits);
}

// The engine's SamplingParams for one prompt, `max_tokens` being resolve_max_tokens()'s result.
// echo with max_tokens 0 generates one token that the response drops (vLLM does the same); echo
// asks for prompt logprobs (at `logprobs`) unless prompt_logprobs is set.
engine::SamplingParams to_sampling_params(const CompletionRequest& request, int64_t max_tokens,
                                          const DefaultSamplingParams& defaults,
                                          const ServerLimits& limits,
                                          bool* temperature_raised = nullptr);

// The raw body as JSON, or ApiException with FastAPI's answer for an empty body, malformed JSON
// or a body that is not an object (`model_class` names the pydantic class in that message).
Json parse_json_body(std::string_view body_text, const char* model_class);

}  // namespace fp4serve::server::openai
