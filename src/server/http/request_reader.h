// Reading one request off the wire: Beast's parser set up as every connection sets it up, and the
// parsed message turned into the transport's HttpRequest. Shared by Connection and the HTTP fuzz
// target (fuzz/http_request_fuzz.cpp), so the fuzzer exercises exactly what a socket feeds.
#pragma once

#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "server/http/http_message.h"
#include "server/http/http_server_config.h"

namespace fp4serve::http {

// A dynamic body grows as bytes arrive; string_body would reserve the announced Content-Length up
// front, letting idle clients claim max_body_bytes each without sending them.
using RequestBody = boost::beast::http::basic_dynamic_body<boost::beast::flat_buffer>;
using RequestParser = boost::beast::http::request_parser<RequestBody>;

// Header and body limits from the config; eager parsing (the body is consumed as it arrives).
void configure_request_parser(RequestParser& parser, const HttpServerConfig& config);

enum class ParseProgress { need_more, done, failed };

// Feeds the buffered bytes to the parser, consuming what it takes. `done`: a whole request is parsed
// (bytes of the next one may stay in `buffer`); `failed`: `ec` says why (a head that fills the whole
// buffer is header_limit: the parser would otherwise wait for more forever); `need_more`: read on.
ParseProgress feed_request_parser(RequestParser& parser, boost::beast::flat_buffer& buffer,
                                  boost::system::error_code& ec);

// The finished message as an HttpRequest (target split and percent-decoded, headers in order).
HttpRequest to_http_request(RequestParser::value_type message, const std::string& remote_address);

}  // namespace fp4serve::http
