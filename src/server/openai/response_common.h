// Pieces every OpenAI response shares: ids, usage, stop_reason, the SSE framing, and the context
// a response is built in. JSON is compact and keeps vLLM's (pydantic's) field order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/request_output.h"
#include "server/openai/openai_error.h"

namespace fp4serve::tokenizer {
class Tokenizer;
}

namespace fp4serve::server::openai {

using Json = nlohmann::ordered_json;

struct ResponseContext {
  std::string id;      // "cmpl-<base>" / "chatcmpl-<base>" (make_response_id)
  int64_t created = 0; // unix seconds, the same on every chunk of a stream
  std::string model;   // the served model name the request resolved to
  std::optional<std::string> system_fingerprint;  // null unless the server sets one
  bool enable_prompt_tokens_details = false;      // --enable-prompt-tokens-details
  bool force_include_usage = false;               // --enable-force-include-usage
  bool return_tokens_as_token_ids = false;        // --return-tokens-as-token-ids (request may override)
  // Chat: also send the pre-#27752 name "reasoning_content" next to "reasoning" (docs/vllm-surface.md
  // §1.3: clients of older vLLM read it).
  bool emit_reasoning_content = false;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // for logprob token strings
};

// uuid4().hex: 32 random lowercase hex digits (vLLM random_uuid).
std::string random_uuid_hex();
// vLLM's id: prefix + (X-Request-Id header, else the body's request_id, else a random uuid).
std::string make_response_id(const std::string& prefix, const std::optional<std::string>& header_id,
                             const std::optional<std::string>& body_request_id);

// UsageInfo: {"prompt_tokens","total_tokens","completion_tokens"[,"prompt_tokens_details"]}.
// `details`: include the key at all; `cached_tokens`: its value (null when absent).
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, bool details,
                std::optional<int64_t> cached_tokens);

// stop_reason: null, the stop string, or the stop token id.
Json stop_reason_json(const engine::StopReason& reason);

// One SSE event: "data: <compact json>\n\n"; and the terminator "data: [DONE]\n\n".
std::string sse_event(const Json& payload);
std::string sse_event(const ApiError& error);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Compact JSON text as pydantic/starlette write it (UTF-8 kept, invalid bytes replaced).
std::string dump_json(const Json& value);

// The HTTP error for a finished sequence whose finish_reason is "error" (vLLM GenerationError).
bool is_generation_error(const std::string& finish_reason);

}  // namespace fp4serve::server::openai
