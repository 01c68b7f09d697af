// Exact (method, path) routing, with FastAPI's answers for misses: 404 for an unknown path,
// 405 plus an Allow header when the path exists under other methods. A path registered with any()
// answers every method, as a Starlette Mount does (vLLM mounts the Prometheus app at /metrics, so
// HEAD and POST /metrics are 200 there).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/exchange.h"

namespace fp4serve::http {

class Router {
 public:
  // Registers a handler; a second registration of the same (method, path) replaces the first.
  void add(std::string method, std::string path, Handler handler);
  void get(std::string path, Handler handler) { add("GET", std::move(path), std::move(handler)); }
  void post(std::string path, Handler handler) { add("POST", std::move(path), std::move(handler)); }
  // Every method not registered on the path otherwise.
  void any(std::string path, Handler handler) { add(kAnyMethod, std::move(path), std::move(handler)); }
  static constexpr const char* kAnyMethod = "*";

  struct Match {
    const Handler* handler = nullptr;    // set when found
    std::vector<std::string> allowed;    // methods of the path when handler is null (405), else empty
    bool path_known() const { return handler != nullptr || !allowed.empty(); }
  };
  Match match(std::string_view method, std::string_view path) const;

 private:
  // path -> (method -> handler); ordered maps keep Allow stable.
  std::map<std::string, std::map<std::string, Handler>, std::less<>> routes_;
};

}  // namespace fp4serve::http
