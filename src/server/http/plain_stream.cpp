#include "server/http/plain_stream.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace fp4serve::http {

namespace {

namespace net = boost::asio;
using boost::system::error_code;

template <class Socket>
class PlainStream final : public ByteStream {
 public:
  explicit PlainStream(Socket socket) : socket_(std::move(socket)), remote_(peer_address(socket_)) {}

  net::any_io_executor get_executor() override { return socket_.get_executor(); }
  const std::string& remote_address() const override { return remote_; }

  void async_handshake(DoneHandler handler) override {
    net::post(socket_.get_executor(), [handler = std::move(handler)] { handler({}); });
  }

  void async_read_some(net::mutable_buffer buffer, IoHandler handler) override {
    socket_.async_read_some(buffer, std::move(handler));
  }

  void async_write(std::vector<net::const_buffer> buffers, IoHandler handler) override {
    net::async_write(socket_, std::move(buffers), std::move(handler));
  }

  void async_shutdown(ShutdownHandler handler) override {
    error_code ec;
    socket_.shutdown(Socket::shutdown_send, ec);
    net::post(socket_.get_executor(), [handler = std::move(handler), ec] { handler(ec, true); });
  }

  void close() override {
    error_code ec;
    socket_.shutdown(Socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // The socket's send buffer is empty on a fresh connection, so this write does not block.
  void refuse(std::string_view response) override {
    error_code ec;
    net::write(socket_, net::buffer(response.data(), response.size()), ec);
    close();
  }

 private:
  Socket socket_;
  const std::string remote_;
};

}  // namespace

std::string peer_address(const net::ip::tcp::socket& socket) {
  error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "-";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

std::string peer_address(const net::local::stream_protocol::socket&) { return {}; }

std::unique_ptr<ByteStream> make_plain_stream(net::ip::tcp::socket socket) {
  error_code ec;
  socket.set_option(net::ip::tcp::no_delay(true), ec);
  return std::make_unique<PlainStream<net::ip::tcp::socket>>(std::move(socket));
}

std::unique_ptr<ByteStream> make_plain_stream(net::local::stream_protocol::socket socket) {
  return std::make_unique<PlainStream<net::local::stream_protocol::socket>>(std::move(socket));
}

}  // namespace fp4serve::http
