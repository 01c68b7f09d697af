#include "tools/bench/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>

namespace fp4serve::tools::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

using Request = http::request<http::string_body>;

Request make_request(http::verb verb, const BaseUrl& base, const std::string& target, const std::string& body,
                     const HeaderMap& headers) {
  Request req{verb, base.prefix + target, 11};
  req.set(http::field::host, base.host + ":" + base.port);
  req.set(http::field::user_agent, "fp4serve-bench");
  if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  return req;
}

// One connection, one exchange. on_data == nullopt: read the whole body into the response.
HttpResponse exchange(const BaseUrl& base, const Request& req,
                      const std::optional<std::function<void(std::string_view)>>& on_data) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(base.host, base.port, ec);
  if (ec) throw BenchHttpError("cannot resolve " + base.host + ":" + base.port + ": " + ec.message());
  stream.connect(endpoints, ec);
  if (ec) throw BenchHttpError("cannot connect to " + base.text() + ": " + ec.message());
  stream.socket().set_option(tcp::no_delay(true), ec);
  http::write(stream, req, ec);
  if (ec) throw BenchHttpError("sending " + std::string(req.target()) + " failed: " + ec.message());

  beast::flat_buffer buffer;
  HttpResponse out;
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 compares Content-Length against the optional and then fails.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(stream, buffer, parser, ec);
  if (ec) throw BenchHttpError("reading the response to " + std::string(req.target()) + " failed: " + ec.message());
  out.status = static_cast<int>(parser.get().result_int());
  out.reason = std::string(parser.get().reason());
  const bool stream_body = on_data.has_value() && out.status == 200;

  std::array<char, 16384> piece;
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    // read_some returns after one read (or straight away if bytes are buffered), so each batch
    // of bytes is handed on when it arrives rather than when a buffer fills.
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    const std::size_t n = piece.size() - parser.get().body().size;
    if (n > 0) {
      if (stream_body) {
        (*on_data)(std::string_view(piece.data(), n));
      } else {
        out.body.append(piece.data(), n);
      }
    }
    if (ec == http::error::end_of_stream) break;
    if (ec) throw BenchHttpError("reading the body of " + std::string(req.target()) + " failed: " + ec.message());
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return out;
}

}  // namespace

BaseUrl parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    throw BenchHttpError("base url '" + url + "': https is not supported by fp4serve bench (use http://)");
  }
  if (url.rfind(scheme, 0) != 0) throw BenchHttpError("base url '" + url + "' must start with http://");
  std::string rest = url.substr(scheme.size());
  BaseUrl b;
  const auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) b.prefix = rest.substr(slash);
  while (!b.prefix.empty() && b.prefix.back() == '/') b.prefix.pop_back();
  if (!hostport.empty() && hostport.front() == '[') {  // [ipv6]:port
    const auto close = hostport.find(']');
    if (close == std::string::npos) throw BenchHttpError("base url '" + url + "': unclosed '['");
    b.host = hostport.substr(1, close - 1);
    b.port = close + 1 < hostport.size() && hostport[close + 1] == ':' ? hostport.substr(close + 2) : "80";
  } else {
    const auto colon = hostport.rfind(':');
    b.host = hostport.substr(0, colon);
    b.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  }
  if (b.host.empty() || b.port.empty()) throw BenchHttpError("base url '" + url + "' has no host or port");
  return b;
}

HttpResponse http_get(const BaseUrl& base, const std::string& target, const HeaderMap& headers) {
  return exchange(base, make_request(http::verb::get, base, target, "", headers), std::nullopt);
}

HttpResponse http_post_json(const BaseUrl& base, const std::string& target, const std::string& body,
                            const HeaderMap& headers) {
  return exchange(base, make_request(http::verb::post, base, target, body, headers), std::nullopt);
}

HttpResponse http_post_stream(const BaseUrl& base, const std::string& target, const std::string& body,
                              const HeaderMap& headers, const std::function<void(std::string_view)>& on_data) {
  return exchange(base, make_request(http::verb::post, base, target, body, headers), on_data);
}

}  // namespace fp4serve::tools::bench
