// CORS as vLLM answers it: `vllm serve` always wraps its app in Starlette's CORSMiddleware with
// --allowed-origins, --allowed-methods, --allowed-headers (JSON lists, default ["*"]) and
// --allow-credentials (default off), max_age 600, nothing exposed and no origin regex
// (vllm/entrypoints/openai/api_server.py build_app; starlette/middleware/cors.py; docs/vllm-surface.md
// §2.1, and §1.1 for the middleware order). Only requests that carry an Origin header are touched:
//   - a preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered here, before
//     routing, whatever the path: 200 "OK", or 400 "Disallowed CORS origin, method, headers" (the
//     failed parts, in that order), text/plain, with the allow-methods/max-age/allow-headers set;
//   - any other request is served as usual and its response gets access-control-allow-origin ("*",
//     or the request's origin when origins are listed or the request sends cookies, then with
//     "vary: Origin") and access-control-allow-credentials when enabled.
// Starlette's quirks are kept: methods compare case-sensitively; "*" in the method list means its
// seven methods (DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT); with "*" in the header list any
// requested headers are echoed back verbatim; a disallowed origin on a simple request just gets no
// allow-origin header (the browser enforces the rest).
// Where it sits (vLLM's middleware order): after the API-key check, whose 401 carries no CORS
// headers but which never checks OPTIONS; before routing, so 404 and 405 answers carry them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/http/http_message.h"

namespace fp4serve::http {

struct CorsSettings {
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;
};

class CorsPolicy {
 public:
  explicit CorsPolicy(const CorsSettings& settings);

  // True when the request has an Origin header (the only requests CORS looks at).
  static bool applies(const HttpRequest& request);

  // The whole answer to a preflight; nullopt when the request is not one.
  std::optional<HttpResponse> preflight(const HttpRequest& request) const;

  // Adds the simple-request headers to a response for `request` (which must have an Origin),
  // replacing any of the same name and appending to an existing Vary, as Starlette's MutableHeaders.
  void decorate(const HttpRequest& request, std::vector<Header>& response_headers) const;

  bool allows_origin(const std::string& origin) const;

 private:
  std::vector<std::string> allow_origins_;
  std::vector<std::string> allow_methods_;   // "*" expanded
  std::vector<std::string> allow_headers_lower_;  // the safelisted ones included, lower-cased
  bool allow_all_origins_;
  bool allow_all_headers_;
  bool allow_credentials_;
  bool preflight_explicit_allow_origin_;
  std::vector<Header> simple_headers_;
  std::vector<Header> preflight_headers_;
};

// Sets a header as Starlette's MutableHeaders.__setitem__ does: replaces the first of that name
// (case-insensitive) and drops the others, or appends it.
void set_header(std::vector<Header>& headers, const std::string& name, const std::string& value);

}  // namespace fp4serve::http
