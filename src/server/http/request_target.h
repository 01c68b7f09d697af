// Splitting an origin-form request-target into the path routing sees and the raw query.
#pragma once

#include <string>
#include <string_view>

namespace fp4serve::http {

// path = the part before '?', percent-decoded (Starlette routes on the decoded path; an invalid
// escape is kept literally, as Python's urllib.parse.unquote does); query = the rest, undecoded.
// An absolute-form target ("http://host/p") is reduced to its path.
void split_target(std::string_view target, std::string& path, std::string& query);

std::string percent_decode(std::string_view s);

// The path routing and the API-key check see under --root-path: Starlette's get_route_path, which
// vLLM's FastAPI(root_path=...) feeds (docs/vllm-surface.md §2.1). A path under the root path
// loses the prefix ("/proxy/v1/models" -> "/v1/models"); the root path alone becomes "" (404);
// any other path is routed as it is, so "/v1/models" still answers without the prefix and
// "/proxyv1" is not under "/proxy". A root path with a trailing slash therefore strips nothing
// (Starlette's behaviour too).
std::string route_path(std::string_view path, std::string_view root_path);

}  // namespace fp4serve::http
