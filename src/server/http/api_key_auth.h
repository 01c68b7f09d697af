// vLLM's --api-key check (vllm/entrypoints/serve/middleware/authenticate.py):
// - no keys configured: no checks at all;
// - OPTIONS is never checked;
// - only paths starting with "/v1", "/v2", "/inference" or "/cohere" are checked (a plain prefix
//   test, so "/v1foo" is guarded too, and /health, /metrics, /tokenize, /version stay open);
// - header "Authorization: <scheme> <token>", split at the first space, scheme compared
//   case-insensitively to "bearer", token compared against every key without early exit.
// A refusal is HTTP 401 with body {"error": "Unauthorized"} (error_bodies.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::http {

class ApiKeyAuth {
 public:
  explicit ApiKeyAuth(std::vector<std::string> keys);

  bool enabled() const { return !keys_.empty(); }
  bool path_is_guarded(std::string_view path) const;
  // True when the request may proceed.
  bool allows(std::string_view method, std::string_view path,
              std::optional<std::string_view> authorization_header) const;

 private:
  bool token_matches(std::string_view token) const;
  std::vector<std::string> keys_;
};

}  // namespace fp4serve::http
