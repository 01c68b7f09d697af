#include "server/http/tls_stream.h"

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include "server/http/plain_stream.h"

namespace fp4serve::http {

namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

template <class Socket>
class TlsStream final : public ByteStream {
 public:
  TlsStream(Socket socket, std::shared_ptr<TlsContext> context)
      : context_(std::move(context)),
        stream_(std::move(socket), *context_),
        remote_(peer_address(stream_.next_layer())) {}

  net::any_io_executor get_executor() override { return stream_.get_executor(); }
  const std::string& remote_address() const override { return remote_; }

  bool needs_handshake() const override { return true; }
  void async_handshake(DoneHandler handler) override {
    stream_.async_handshake(ssl::stream_base::server, std::move(handler));
  }

  void async_read_some(net::mutable_buffer buffer, IoHandler handler) override {
    stream_.async_read_some(buffer, [handler = std::move(handler)](error_code ec, std::size_t n) {
      // A client that closes the socket without close_notify (most HTTP clients do) is a client
      // that went away, as EOF is on a plain socket.
      if (ec == ssl::error::stream_truncated) ec = net::error::eof;
      handler(ec, n);
    });
  }

  // ssl::stream writes one buffer of a sequence per record; the queued pieces of a response (head,
  // body, many small SSE chunks) are joined first so that one write is one record and one syscall.
  void async_write(std::vector<net::const_buffer> buffers, IoHandler handler) override {
    if (buffers.size() == 1) {
      net::async_write(stream_, buffers.front(), std::move(handler));
      return;
    }
    joined_.clear();
    for (const net::const_buffer& b : buffers) joined_.append(static_cast<const char*>(b.data()), b.size());
    net::async_write(stream_, net::buffer(joined_), std::move(handler));
  }

  void async_shutdown(ShutdownHandler handler) override {
    stream_.async_shutdown([handler = std::move(handler)](error_code ec) { handler(ec, false); });
  }

  void close() override {
    error_code ec;
    stream_.next_layer().shutdown(Socket::shutdown_both, ec);
    stream_.next_layer().close(ec);
  }

  void refuse(std::string_view) override { close(); }

 private:
  std::shared_ptr<TlsContext> context_;  // before stream_, which refers to it
  ssl::stream<Socket> stream_;
  const std::string remote_;
  std::string joined_;  // the gathered write in flight (at most one at a time)
};

}  // namespace

std::unique_ptr<ByteStream> make_tls_stream(net::ip::tcp::socket socket, std::shared_ptr<TlsContext> context) {
  error_code ec;
  socket.set_option(net::ip::tcp::no_delay(true), ec);
  return std::make_unique<TlsStream<net::ip::tcp::socket>>(std::move(socket), std::move(context));
}

std::unique_ptr<ByteStream> make_tls_stream(net::local::stream_protocol::socket socket,
                                            std::shared_ptr<TlsContext> context) {
  return std::make_unique<TlsStream<net::local::stream_protocol::socket>>(std::move(socket), std::move(context));
}

}  // namespace fp4serve::http
