// The bytes of one accepted connection, whatever carries them: a TCP or Unix-domain socket
// (plain_stream.h) or TLS over either (tls_stream.h). Connection speaks HTTP/1.1 over this
// interface only, so the HTTP code is the same for http://, https:// and --uds, and each transport
// is a small file of its own.
//
// All calls are made on the connection's strand (the stream's executor). At most one read and one
// write are outstanding at a time (Connection guarantees it); the buffers passed in must stay valid
// until the handler runs. Handlers are invoked through the executor, never inside the call.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

namespace fp4serve::http {

class ByteStream {
 public:
  using IoHandler = std::function<void(boost::system::error_code, std::size_t)>;
  using DoneHandler = std::function<void(boost::system::error_code)>;
  // `read_until_eof`: the stream only half-closed (TCP FIN); the caller should read and discard
  // until the peer closes, so that a client still sending gets the response instead of a reset.
  using ShutdownHandler = std::function<void(boost::system::error_code, bool read_until_eof)>;

  virtual ~ByteStream() = default;

  virtual boost::asio::any_io_executor get_executor() = 0;
  // "ip:port" of the peer; empty for a Unix-domain client (uvicorn's access log then starts with
  // ' - "GET ...', and so does ours).
  virtual const std::string& remote_address() const = 0;

  // True when bytes can flow only after async_handshake (TLS).
  virtual bool needs_handshake() const { return false; }
  virtual void async_handshake(DoneHandler handler) = 0;

  virtual void async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) = 0;
  // Writes every byte of `buffers` (a gathered write); the handler gets the total.
  virtual void async_write(std::vector<boost::asio::const_buffer> buffers, IoHandler handler) = 0;

  // Ends our direction of the connection after the last response.
  virtual void async_shutdown(ShutdownHandler handler) = 0;
  // Closes at once; outstanding operations end with operation_aborted.
  virtual void close() = 0;

  // For a connection the server cannot take (connection_limits.h): writes `response` if the
  // transport can without blocking, then closes. TLS cannot answer before a handshake and just
  // closes.
  virtual void refuse(std::string_view response) = 0;
};

}  // namespace fp4serve::http
