// ByteStream over TLS (--ssl-certfile ...): Asio's ssl::stream on a TCP or Unix-domain socket.
// The handshake runs first (Connection bounds it by the request-head deadline); the graceful end
// sends close_notify and waits for the peer's (or its EOF), bounded by the linger timeout.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "server/http/byte_stream.h"
#include "server/http/tls_context.h"

namespace fp4serve::http {

// The stream keeps `context` alive: --enable-ssl-refresh may replace the server's context while
// this connection still uses the old one.
std::unique_ptr<ByteStream> make_tls_stream(boost::asio::ip::tcp::socket socket,
                                            std::shared_ptr<TlsContext> context);
std::unique_ptr<ByteStream> make_tls_stream(boost::asio::local::stream_protocol::socket socket,
                                            std::shared_ptr<TlsContext> context);

}  // namespace fp4serve::http
