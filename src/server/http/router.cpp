#include "server/http/router.h"

#include <stdexcept>

namespace fp4serve::http {

void Router::add(std::string method, std::string path, Handler handler) {
  if (method.empty() || path.empty() || path.front() != '/') {
    throw std::invalid_argument("Router::add: bad route '" + method + " " + path +
                                "' (method must be non-empty and path must start with '/')");
  }
  if (!handler) throw std::invalid_argument("Router::add: empty handler for " + method + " " + path);
  routes_[std::move(path)][std::move(method)] = std::move(handler);
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match m;
  auto p = routes_.find(path);
  if (p == routes_.end()) return m;
  auto h = p->second.find(std::string(method));
  if (h == p->second.end()) h = p->second.find(kAnyMethod);
  if (h != p->second.end()) {
    m.handler = &h->second;
    return m;
  }
  for (const auto& [allowed_method, unused] : p->second) m.allowed.push_back(allowed_method);
  return m;
}

}  // namespace fp4serve::http
