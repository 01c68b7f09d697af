#include "server/http/api_key_auth.h"

#include <algorithm>

namespace fp4serve::http {

namespace {

constexpr std::string_view kGuardedPrefixes[] = {"/v1", "/v2", "/inference", "/cohere"};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Time depends on the key's length only, never on where the candidate first differs. (vLLM hashes
// both sides with SHA-256 first to hide the key length as well; the length of a key is not worth a
// crypto dependency here.)
bool constant_time_equals(std::string_view key, std::string_view candidate) {
  unsigned char diff = key.size() == candidate.size() ? 0 : 1;
  for (std::size_t i = 0; i < key.size(); ++i) {
    unsigned char c = candidate.empty() ? 0 : static_cast<unsigned char>(candidate[i % candidate.size()]);
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(key[i]) ^ c);
  }
  return diff == 0;
}

}  // namespace

ApiKeyAuth::ApiKeyAuth(std::vector<std::string> keys) {
  // vLLM drops empty keys: `[key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]`.
  for (std::string& k : keys) {
    if (!k.empty()) keys_.push_back(std::move(k));
  }
}

bool ApiKeyAuth::path_is_guarded(std::string_view path) const {
  return std::any_of(std::begin(kGuardedPrefixes), std::end(kGuardedPrefixes),
                     [&](std::string_view prefix) { return path.starts_with(prefix); });
}

bool ApiKeyAuth::token_matches(std::string_view token) const {
  bool match = false;
  for (const std::string& key : keys_) match |= constant_time_equals(key, token);
  return match;
}

bool ApiKeyAuth::allows(std::string_view method, std::string_view path,
                        std::optional<std::string_view> authorization_header) const {
  if (!enabled() || method == "OPTIONS" || !path_is_guarded(path)) return true;
  if (!authorization_header || authorization_header->empty()) return false;
  std::string_view value = *authorization_header;
  std::size_t space = value.find(' ');
  std::string_view scheme = value.substr(0, space);
  std::string_view token = space == std::string_view::npos ? std::string_view() : value.substr(space + 1);
  if (!iequals(scheme, "bearer")) return false;
  return token_matches(token);
}

}  // namespace fp4serve::http
