// Where the server accepts connections, and what each accepted socket becomes.
//
// Address: TCP host:port, or with vLLM's --uds a Unix-domain socket path ("If set, host and port
// arguments are ignored", vllm/entrypoints/openai/cli_args.py; api_server.py binds it itself). vLLM's
// bind fails on any existing path, so a socket file left by a crashed server blocks the next start;
// here a socket file nobody listens on is removed first, while a live socket or any other kind of
// file is refused. The socket file is removed again when the listener closes (docs/vllm-surface.md
// §2.1).
//
// Transport: a plain ByteStream, or TLS when the server has a TLS context (over TCP or the Unix
// socket, as uvicorn does); with --enable-ssl-refresh every connection takes the context current
// when it is accepted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/strand.hpp>

#include "server/http/byte_stream.h"
#include "server/http/http_server_config.h"
#include "server/http/tls_context_source.h"

namespace fp4serve::http {

class Listener {
 public:
  using AcceptHandler = std::function<void(boost::system::error_code, std::unique_ptr<ByteStream>)>;

  // `tls` null: plain connections.
  Listener(boost::asio::io_context& io, std::shared_ptr<TlsContextSource> tls);

  // Binds and listens on config.uds, else config.host:config.port. Throws std::runtime_error naming
  // the address.
  void open(const HttpServerConfig& config);
  // Accepts one connection onto a strand of its own. Call on executor().
  void async_accept(AcceptHandler handler);
  // Call on executor(). Idempotent.
  void close();
  bool is_open() const;

  const boost::asio::strand<boost::asio::io_context::executor_type>& executor() const { return executor_; }
  unsigned short port() const { return port_; }  // the bound TCP port; 0 on a Unix socket
  // "http://127.0.0.1:8000", "https://[::1]:8443", "unix:/run/fp4serve.sock" (vLLM's listen address).
  const std::string& address() const { return address_; }

 private:
  void open_tcp(const std::string& host, unsigned short port);
  void open_unix(const std::string& path);
  template <class Socket>
  std::unique_ptr<ByteStream> wrap(Socket socket) const;

  boost::asio::io_context& io_;
  boost::asio::strand<boost::asio::io_context::executor_type> executor_;
  std::shared_ptr<TlsContextSource> tls_;
  std::optional<boost::asio::ip::tcp::acceptor> tcp_;
  std::optional<boost::asio::local::stream_protocol::acceptor> unix_;
  std::string unix_path_;
  unsigned long long unix_inode_ = 0;  // of the socket file we made: removed on close only if still ours
  unsigned short port_ = 0;
  std::string address_;
};

}  // namespace fp4serve::http
