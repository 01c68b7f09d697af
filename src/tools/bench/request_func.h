// One benchmark request against an OpenAI-compatible endpoint, measured the way vLLM's
// async_request_openai_completions / async_request_openai_chat_completions measure it:
// st just before the POST; every SSE message with non-empty "choices" is a token chunk (first ->
// TTFT, later -> one ITL entry each); a "usage" message sets output_tokens and prompt_len;
// latency = last token chunk - st.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/bench/http_client.h"

namespace fp4serve::tools::bench {

// time.perf_counter(): seconds on the monotonic clock.
double perf_counter();

enum class EndpointKind { kCompletions, kChat };

struct RequestInput {
  EndpointKind kind = EndpointKind::kCompletions;
  std::string endpoint;  // e.g. /v1/completions
  std::string prompt;
  int prompt_len = 0;
  int output_len = 0;
  std::string model;
  bool ignore_eos = false;
  nlohmann::json extra_body = nlohmann::json::object();  // merged over the payload
  HeaderMap extra_headers;
  std::string request_id;  // sent as x-request-id when not empty
};

struct RequestOutput {
  std::string generated_text;
  bool success = false;
  double latency = 0.0;
  int output_tokens = 0;
  double ttft = 0.0;
  std::vector<double> itl;
  int prompt_len = 0;
  std::string error;
  double start_time = 0.0;
  double client_queue_time = 0.0;
};

nlohmann::json build_payload(const RequestInput& in);

// Never throws: connection problems become success=false with the message in error.
RequestOutput run_request(const BaseUrl& base, const RequestInput& in);

}  // namespace fp4serve::tools::bench
