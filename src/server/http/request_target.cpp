#include "server/http/request_target.h"

namespace fp4serve::http {

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = hex_value(s[i + 1]);
      int lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

void split_target(std::string_view target, std::string& path, std::string& query) {
  // Absolute form (proxies): skip "scheme://authority".
  if (auto scheme = target.find("://"); scheme != std::string_view::npos && !target.empty() && target.front() != '/') {
    auto slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  auto q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  path = percent_decode(raw_path);
}

std::string route_path(std::string_view path, std::string_view root_path) {
  if (root_path.empty() || !path.starts_with(root_path)) return std::string(path);
  if (path.size() == root_path.size()) return {};
  if (path[root_path.size()] == '/') return std::string(path.substr(root_path.size()));
  return std::string(path);
}

}  // namespace fp4serve::http
