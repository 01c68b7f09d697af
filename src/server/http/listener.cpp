#include "server/http/listener.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

#include "server/http/plain_stream.h"
#include "server/http/tls_stream.h"

namespace fp4serve::http {

namespace net = boost::asio;
using net::ip::tcp;
using local_socket = net::local::stream_protocol;
using boost::system::error_code;

namespace {

// What is at `path` before we bind there: nothing (fine), a socket file nobody listens on (a
// crashed server's: removed), or something we must not replace (refused).
void clear_stale_socket_file(net::io_context& io, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISSOCK(st.st_mode)) {
    throw std::runtime_error("HTTP server: --uds '" + path + "' exists and is not a socket; not replacing it");
  }
  local_socket::socket probe(io);
  error_code ec;
  probe.connect(local_socket::endpoint(path), ec);
  if (!ec) throw std::runtime_error("HTTP server: --uds '" + path + "': another server is listening on it");
  if (ec == net::error::connection_refused && ::unlink(path.c_str()) != 0) {
    throw std::runtime_error("HTTP server: --uds '" + path + "': cannot remove the stale socket file: " +
                             std::strerror(errno));
  }
}

unsigned long long inode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? static_cast<unsigned long long>(st.st_ino) : 0;
}

}  // namespace

Listener::Listener(net::io_context& io, std::shared_ptr<TlsContextSource> tls)
    : io_(io), executor_(net::make_strand(io)), tls_(std::move(tls)) {}

void Listener::open(const HttpServerConfig& config) {
  if (!config.uds.empty()) {
    open_unix(config.uds);
  } else {
    open_tcp(config.host, config.port);
  }
}

void Listener::open_tcp(const std::string& host, unsigned short port) {
  std::string where = host + ":" + std::to_string(port);
  tcp::endpoint endpoint;
  error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      throw std::runtime_error("HTTP server: cannot resolve host '" + host + "': " + ec.message());
    }
    endpoint = results.begin()->endpoint();
  }
  tcp_.emplace(executor_);
  tcp_->open(endpoint.protocol(), ec);
  if (!ec) tcp_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) tcp_->bind(endpoint, ec);
  if (!ec) tcp_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("HTTP server: cannot listen on " + where + ": " + ec.message());
  port_ = tcp_->local_endpoint().port();
  const std::string host_part = endpoint.address().is_v6() ? "[" + host + "]" : host;
  address_ = std::string(tls_ ? "https" : "http") + "://" + host_part + ":" + std::to_string(port_);
}

void Listener::open_unix(const std::string& path) {
  clear_stale_socket_file(io_, path);
  error_code ec;
  std::optional<local_socket::endpoint> endpoint;
  try {
    endpoint.emplace(path);  // throws when the path does not fit sun_path (108 bytes)
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("HTTP server: --uds '" + path + "': " + e.code().message());
  }
  unix_.emplace(executor_);
  unix_->open(endpoint->protocol(), ec);
  if (!ec) unix_->bind(*endpoint, ec);
  if (!ec) unix_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("HTTP server: cannot listen on unix socket '" + path + "': " + ec.message());
  unix_path_ = path;
  unix_inode_ = inode_of(path);
  address_ = "unix:" + path;
}

template <class Socket>
std::unique_ptr<ByteStream> Listener::wrap(Socket socket) const {
  if (tls_) return make_tls_stream(std::move(socket), tls_->current());
  return make_plain_stream(std::move(socket));
}

void Listener::async_accept(AcceptHandler handler) {
  if (tcp_) {
    tcp_->async_accept(net::make_strand(io_), [this, handler = std::move(handler)](error_code ec, tcp::socket s) {
      handler(ec, ec ? nullptr : wrap(std::move(s)));
    });
  } else if (unix_) {
    unix_->async_accept(net::make_strand(io_),
                        [this, handler = std::move(handler)](error_code ec, local_socket::socket s) {
                          handler(ec, ec ? nullptr : wrap(std::move(s)));
                        });
  }
}

bool Listener::is_open() const { return (tcp_ && tcp_->is_open()) || (unix_ && unix_->is_open()); }

void Listener::close() {
  error_code ec;
  if (tcp_) tcp_->close(ec);
  if (unix_ && unix_->is_open()) {
    unix_->close(ec);
    // Only the file we made: another server may have taken the path since.
    if (unix_inode_ != 0 && inode_of(unix_path_) == unix_inode_) ::unlink(unix_path_.c_str());
  }
}

}  // namespace fp4serve::http
