// Helpers the route handlers share: JSON answers, error answers, engine submission errors.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/http/exchange.h"
#include "server/openai/openai_error.h"
#include "server/openai/response_common.h"
#include "server/routes/serving_context.h"

namespace fp4serve::server {

void respond_json(const std::shared_ptr<http::Exchange>& ex, int status, const std::string& body);
void respond_error(const std::shared_ptr<http::Exchange>& ex, const openai::ApiError& error);
// EngineRejected -> 503 + Retry-After (overloaded, shutting down) or 400 (invalid).
openai::ApiError engine_rejection_error(const engine::EngineRejected& e);
// Retry-After seconds sent with 503s.
inline constexpr int kRetryAfterSeconds = 1;
void respond_engine_rejection(const std::shared_ptr<http::Exchange>& ex, const engine::EngineRejected& e);
// 500 "Internal server error" for an engine-side failure of a request (vLLM's text for it).
openai::ApiError internal_error(const std::string& detail);
// The answer for an engine output that carries an error: 503 "the server is shutting down" when the
// shutdown drain ended the request, else internal_error.
openai::ApiError engine_output_error(const engine::RequestOutput& out);

// The context every response of a request is built in: vLLM's id (prefix + X-Request-Id header, else
// the body's request_id, else a random uuid), the creation time, the served name and the server's
// response options.
openai::ResponseContext make_response_context(const ServingContext& ctx, const http::Exchange& ex,
                                              const std::string& id_prefix,
                                              const std::optional<std::string>& body_request_id,
                                              const std::string& model_name);

// Adds one engine delta's tokens, logprobs and end to an accumulated (non-streamed) sequence
// (openai::CompletionSequence or openai::ChatSequence); the prompt logprobs are moved out of it.
template <class Sequence>
void append_delta(Sequence& s, engine::SequenceDelta& d) {
  s.token_ids.insert(s.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  s.logprobs.insert(s.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  if (d.prompt_logprobs) s.prompt_logprobs = std::move(d.prompt_logprobs);
  if (d.finished()) {
    s.finish_reason = d.finish_reason;
    s.stop_reason = d.stop_reason;
  }
}

}  // namespace fp4serve::server
