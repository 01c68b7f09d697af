// libFuzzer target: the bytes a client sends on one connection, through the same request reader a
// Connection uses (request_reader.h: Beast's parser with the server's limits, fed in pieces the
// first input byte sizes, pipelined requests included), then what the server does with a parsed
// request before any handler: routing, the API-key check, header lookups, the access-log line and a
// response head that echoes a request header. Expected: requests, parse errors, or
// std::invalid_argument from serialize_head for a header value it must not echo; anything else (a
// crash, a sanitizer report, another exception, an invariant below broken) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>

#include "server/http/api_key_auth.h"
#include "server/http/http_message.h"
#include "server/http/request_reader.h"
#include "server/http/router.h"
#include "server/http/status_line.h"

namespace {

using namespace fp4serve::http;

const Router& routes() {
  static const Router router = [] {
    Router r;
    const Handler none = [](std::shared_ptr<Exchange>) {};
    for (const char* p : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/ping"})
      r.post(p, none);
    for (const char* p : {"/v1/models", "/version", "/health", "/ping", "/metrics"}) r.get(p, none);
    return r;
  }();
  return router;
}

void handle(const HttpRequest& req) {
  // Invariants of the conversion: versions are 1.0 or 1.1, and the raw query never leaks into the
  // path (a '?' in the path can only come from a percent-encoded %3F).
  if (req.version != 10 && req.version != 11) std::abort();
  if (req.path.find('?') != std::string::npos && req.target.find("%3F") == std::string::npos &&
      req.target.find("%3f") == std::string::npos)
    std::abort();
  const Router::Match m = routes().match(req.method, req.path);
  if (m.handler && !m.allowed.empty()) std::abort();
  static const ApiKeyAuth auth({"secret"});
  (void)auth.allows(req.method, req.path, req.header("authorization"));
  AccessLogEntry entry{req.remote_address, req.method, req.target, req.version, 200, req.body.size(), 1.0, true};
  (void)uvicorn_style_access_line(entry);
  std::vector<Header> echoed;
  if (auto id = req.header("x-request-id")) echoed.push_back({"x-request-id", std::string(*id)});
  try {
    (void)serialize_head(req.version, 200, "application/json", echoed, BodyFraming::content_length,
                         req.body.size(), req.keep_alive);
  } catch (const std::invalid_argument&) {
    // A value with CR/LF/NUL is refused, never echoed (response splitting).
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  HttpServerConfig config;
  config.max_header_bytes = 2048;  // small limits reach the limit paths often
  config.max_body_bytes = 8192;
  const std::size_t piece = 1 + data[0] % 64;
  boost::beast::flat_buffer buffer(config.max_header_bytes + 1024);
  std::optional<RequestParser> parser;
  std::size_t pos = 1;
  while (pos < size) {
    const std::size_t room = buffer.max_size() - buffer.size();
    if (room == 0) return 0;  // a connection stops reading here until its response is written
    const std::size_t n = std::min({piece, size - pos, room});
    auto dst = buffer.prepare(n);
    std::memcpy(dst.data(), data + pos, n);
    buffer.commit(n);
    pos += n;
    while (buffer.size() > 0) {
      if (!parser) {
        parser.emplace();
        configure_request_parser(*parser, config);
      }
      boost::system::error_code ec;
      const ParseProgress progress = feed_request_parser(*parser, buffer, ec);
      if (progress == ParseProgress::failed) {
        if (!ec) std::abort();
        return 0;  // the connection answers 400/413/431 and closes
      }
      if (progress == ParseProgress::need_more) break;
      handle(to_http_request(parser->release(), "127.0.0.1:1"));
      parser.reset();
    }
  }
  return 0;
}
