#include "server/http/request_reader.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/error.hpp>

#include "server/http/request_target.h"

namespace fp4serve::http {

void configure_request_parser(RequestParser& parser, const HttpServerConfig& config) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(config.max_header_bytes, UINT32_MAX)));
  parser.body_limit(config.max_body_bytes);
  parser.eager(true);
}

ParseProgress feed_request_parser(RequestParser& parser, boost::beast::flat_buffer& buffer,
                                  boost::system::error_code& ec) {
  namespace bhttp = boost::beast::http;
  ec = {};
  while (buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      break;
    }
    if (ec) return ParseProgress::failed;
    if (parser.is_done()) return ParseProgress::done;
    if (used == 0) break;
  }
  if (buffer.size() == buffer.max_size()) {
    ec = bhttp::error::header_limit;
    return ParseProgress::failed;
  }
  return ParseProgress::need_more;
}

HttpRequest to_http_request(RequestParser::value_type message, const std::string& remote_address) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  split_target(request.target, request.path, request.query);
  request.version = message.version();
  request.keep_alive = message.keep_alive();
  request.remote_address = remote_address;
  request.headers.reserve(static_cast<std::size_t>(std::distance(message.begin(), message.end())));
  for (const auto& field : message) {
    request.headers.push_back(Header{std::string(field.name_string()), std::string(field.value())});
  }
  request.body = boost::beast::buffers_to_string(message.body().data());
  return request;
}

}  // namespace fp4serve::http
