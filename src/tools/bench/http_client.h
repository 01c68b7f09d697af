// A small blocking HTTP/1.1 client (Boost.Beast) for the load generator: one connection per
// request, plain http only. The streaming call hands the body to a callback piece by piece as
// the bytes arrive, so the caller can timestamp every SSE message the way aiohttp's iter_any does.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp4serve::tools::bench {

class BenchHttpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "http://host:port[/prefix]" split for Beast. The prefix (without trailing '/') is prepended to
// every target, so --base-url http://h:8000/api works like vLLM's string concatenation.
struct BaseUrl {
  std::string host;
  std::string port;
  std::string prefix;
  std::string text() const { return "http://" + host + ":" + port + prefix; }
};

BaseUrl parse_base_url(const std::string& url);

struct HttpResponse {
  int status = 0;
  std::string reason;
  std::string body;
};

using HeaderMap = std::map<std::string, std::string>;

HttpResponse http_get(const BaseUrl& base, const std::string& target, const HeaderMap& headers = {});
HttpResponse http_post_json(const BaseUrl& base, const std::string& target, const std::string& body,
                            const HeaderMap& headers = {});

// POST, then: on 200 the body is passed to on_data as it arrives (HttpResponse::body stays
// empty); on any other status the whole body is read into HttpResponse::body. Throws
// BenchHttpError when the server cannot be reached or the connection breaks.
HttpResponse http_post_stream(const BaseUrl& base, const std::string& target, const std::string& body,
                              const HeaderMap& headers, const std::function<void(std::string_view)>& on_data);

}  // namespace fp4serve::tools::bench
