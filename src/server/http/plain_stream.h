// ByteStream over a plain socket: TCP (http://) or a Unix-domain socket (--uds). Bytes go to the
// socket as they are; the graceful end is a half-close (FIN) after which the connection reads and
// discards until the peer closes (Connection::graceful_close).
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "server/http/byte_stream.h"

namespace fp4serve::http {

// Sets TCP_NODELAY: SSE chunks are small and latency-bound.
std::unique_ptr<ByteStream> make_plain_stream(boost::asio::ip::tcp::socket socket);
std::unique_ptr<ByteStream> make_plain_stream(boost::asio::local::stream_protocol::socket socket);

// "ip:port" of a TCP peer, "-" when the socket has none (already reset).
std::string peer_address(const boost::asio::ip::tcp::socket& socket);
// Unix-domain peers are anonymous: "" (uvicorn logs an empty client address for them).
std::string peer_address(const boost::asio::local::stream_protocol::socket& socket);

}  // namespace fp4serve::http
