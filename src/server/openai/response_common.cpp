#include "server/openai/response_common.h"

#include <random>

namespace fp4serve::server::openai {

std::string random_uuid_hex() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string out(32, '0');
  uint64_t a = rng(), b = rng();
  for (int i = 0; i < 16; ++i) {
    out[static_cast<std::size_t>(i)] = kHex[(a >> (4 * i)) & 0xf];
    out[static_cast<std::size_t>(16 + i)] = kHex[(b >> (4 * i)) & 0xf];
  }
  out[12] = '4';                                         // uuid version 4
  out[16] = kHex[8 + ((b >> 2) & 0x3)];                  // variant 10xx
  return out;
}

std::string make_response_id(const std::string& prefix, const std::optional<std::string>& header_id,
                             const std::optional<std::string>& body_request_id) {
  if (header_id && !header_id->empty()) return prefix + *header_id;
  if (body_request_id && !body_request_id->empty()) return prefix + *body_request_id;
  return prefix + random_uuid_hex();
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, bool details,
                std::optional<int64_t> cached_tokens) {
  Json u = Json::object();
  u["prompt_tokens"] = prompt_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  u["completion_tokens"] = completion_tokens;
  if (details) {
    u["prompt_tokens_details"] = cached_tokens ? Json{{"cached_tokens", *cached_tokens}} : Json();
  }
  return u;
}

Json stop_reason_json(const engine::StopReason& reason) {
  if (const auto* s = std::get_if<std::string>(&reason)) return *s;
  if (const auto* i = std::get_if<std::int64_t>(&reason)) return *i;
  return nullptr;
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string sse_event(const Json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_event(const ApiError& error) { return "data: " + error.body() + "\n\n"; }

bool is_generation_error(const std::string& finish_reason) { return finish_reason == "error"; }

}  // namespace fp4serve::server::openai
