#include "server/http/http_server.h"

#include <algorithm>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "server/http/connection.h"
#include "server/http/connection_exchange.h"
#include "server/http/server_context.h"

namespace fp4serve::http {

namespace net = boost::asio;
using net::ip::tcp;
using boost::system::error_code;

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  Impl(HttpServerConfig config, Router router)
      : threads_count_(resolve_thread_count(config.io_threads)),
        ctx_(std::make_shared<ServerContext>(std::move(config), std::move(router), threads_count_)),
        acceptor_(net::make_strand(ctx_->io)),
        retry_timer_(acceptor_.get_executor()) {}

  static unsigned resolve_thread_count(unsigned requested) {
    if (requested > 0) return requested;
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    return std::min(4u, hw);
  }

  void start() {
    if (started_) throw std::logic_error("HttpServer::start called twice");
    const HttpServerConfig& cfg = ctx_->config;
    std::string where = cfg.host + ":" + std::to_string(cfg.port);
    tcp::endpoint endpoint;
    error_code ec;
    auto address = net::ip::make_address(cfg.host, ec);
    if (!ec) {
      endpoint = tcp::endpoint(address, cfg.port);
    } else {
      tcp::resolver resolver(ctx_->io);
      auto results = resolver.resolve(cfg.host, std::to_string(cfg.port), ec);
      if (ec || results.empty()) {
        throw std::runtime_error("HTTP server: cannot resolve host '" + cfg.host + "': " + ec.message());
      }
      endpoint = results.begin()->endpoint();
    }
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("HTTP server: cannot listen on " + where + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    started_ = true;
    do_accept();
    work_.emplace(net::make_work_guard(ctx_->io));
    threads_.reserve(threads_count_);
    for (unsigned i = 0; i < threads_count_; ++i) {
      threads_.emplace_back([ctx = ctx_] { run_io(*ctx); });
    }
  }

  static void run_io(ServerContext& ctx) {
    for (;;) {
      try {
        ctx.io.run();
        return;
      } catch (const std::exception& e) {
        // A handler bug must not take an io thread (and every connection on it) down.
        ctx.log_error(std::string("exception escaped an io handler: ") + e.what());
      }
    }
  }

  void do_accept() {
    acceptor_.async_accept(net::make_strand(ctx_->io),
                           [self = shared_from_this()](error_code ec, tcp::socket socket) {
                             self->on_accept(ec, std::move(socket));
                           });
  }

  void on_accept(error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open() || ec == net::error::operation_aborted) return;
    if (ec) {
      // EMFILE/ENFILE and friends: back off instead of spinning, then keep accepting; logged at a
      // limited rate (a flood of these is what exhaustion looks like).
      ctx_->accept_errors.log("accept failed: " + ec.message());
      retry_timer_.expires_after(std::chrono::milliseconds(50));
      retry_timer_.async_wait([self = shared_from_this()](error_code wait_ec) {
        if (!wait_ec && self->acceptor_.is_open()) self->do_accept();
      });
      return;
    }
    admit(std::move(socket));
    do_accept();
  }

  // The connection cap (connection_limits.h): under it, a plain connection; at it, evict the oldest
  // connection without a request in flight, else take the newcomer as overflow, else refuse it.
  void admit(tcp::socket socket) {
    std::shared_ptr<Connection> victim;
    std::vector<std::shared_ptr<Connection>> scanned;  // released after the lock (see below)
    bool overflow = false;
    {
      std::lock_guard lock(ctx_->mu);
      const std::size_t regular = ctx_->connections.size() - ctx_->overflow_connections;
      if (regular >= ctx_->max_connections) {
        victim = eviction_victim_locked(scanned);
        if (!victim) {
          if (ctx_->overflow_connections >= kMaxOverflow) {
            refuse(std::move(socket), ctx_->connections.size());
            return;
          }
          overflow = true;
        }
      }
    }
    auto connection = std::make_shared<Connection>(ctx_, std::move(socket), overflow);
    {
      std::lock_guard lock(ctx_->mu);
      ctx_->connections[connection->id()] = connection;
      if (overflow) ++ctx_->overflow_connections;
    }
    if (victim) net::post(victim->executor(), [victim] { victim->evict(); });
    net::post(connection->executor(), [connection] { connection->start(); });
  }

  // Oldest first: a connection between requests or with its head still arriving, else one whose
  // body is arriving. Overflow connections and those already claimed are skipped. The connections
  // looked at are kept alive in `scanned`, so that none is destroyed while ctx_->mu is held (a
  // Connection's destructor takes it).
  std::shared_ptr<Connection> eviction_victim_locked(std::vector<std::shared_ptr<Connection>>& scanned) {
    std::shared_ptr<Connection> body_phase;
    scanned.reserve(ctx_->connections.size());
    for (const auto& [id, weak] : ctx_->connections) {
      auto c = weak.lock();
      if (!c || c->overflow()) continue;
      scanned.push_back(c);
      const Connection::Phase phase = c->phase();
      if (phase == Connection::Phase::idle || phase == Connection::Phase::head) {
        if (c->claim_for_eviction()) return c;
      } else if (phase == Connection::Phase::body && !body_phase) {
        body_phase = c;
      }
    }
    if (body_phase && body_phase->claim_for_eviction()) return body_phase;
    return nullptr;
  }

  // Past the cap and the overflow reserve: a 503 written at once (the socket's send buffer is
  // empty, so this does not block), then closed without reading.
  void refuse(tcp::socket socket, std::size_t open) {
    error_code ec;
    const std::string bytes = connection_limit_response(open, ctx_->max_connections);
    net::write(socket, net::buffer(bytes), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  void stop_accepting() {
    if (!started_) return;
    std::promise<void> done;
    auto future = done.get_future();
    net::post(acceptor_.get_executor(), [self = shared_from_this(), &done] {
      error_code ec;
      self->acceptor_.close(ec);
      self->retry_timer_.cancel();
      done.set_value();
    });
    // From an io thread (e.g. a handler) the posted close runs after we return; do not wait for it.
    if (!threads_.empty() && !ctx_->io.get_executor().running_in_this_thread()) future.wait();
  }

  std::vector<std::shared_ptr<Connection>> live_connections() const {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard lock(ctx_->mu);
    for (const auto& [id, weak] : ctx_->connections) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  void begin_drain() {
    ctx_->draining = true;
    for (auto& c : live_connections()) {
      net::post(c->executor(), [c] { c->drain(); });
    }
  }

  bool wait_idle(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(ctx_->mu);
    return ctx_->changed.wait_until(lock, deadline, [&] { return ctx_->in_flight.empty(); });
  }

  void stop() {
    if (!started_ || stopped_) return;
    if (ctx_->io.get_executor().running_in_this_thread()) {
      throw std::logic_error("HttpServer::stop/shutdown called from an io thread (it joins them)");
    }
    stopped_ = true;
    stop_accepting();
    ctx_->draining = true;
    for (auto& c : live_connections()) {
      net::post(c->executor(), [c] { c->close(CloseReason::server_shutdown); });
    }
    {
      // Let the posted closes run (they fire on_close) before the threads go.
      std::unique_lock lock(ctx_->mu);
      ctx_->changed.wait_for(lock, std::chrono::seconds(2),
                             [&] { return ctx_->connections.empty(); });
    }
    work_.reset();
    ctx_->io.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    // Destroy what is still queued (it may hold connections) on this thread, not in a destructor
    // that some exchange's last release happens to trigger.
    ctx_->io.restart();
    ctx_->io.poll();
  }

  unsigned short port_ = 0;
  const unsigned threads_count_;
  std::shared_ptr<ServerContext> ctx_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  bool started_ = false;
  bool stopped_ = false;
};

HttpServer::HttpServer(HttpServerConfig config, Router router)
    : impl_(std::make_shared<Impl>(std::move(config), std::move(router))) {}

HttpServer::~HttpServer() {
  try {
    impl_->stop();
  } catch (...) {
  }
}

void HttpServer::start() { impl_->start(); }
unsigned short HttpServer::port() const { return impl_->port_; }
unsigned HttpServer::io_thread_count() const { return impl_->threads_count_; }
void HttpServer::stop_accepting() { impl_->stop_accepting(); }
void HttpServer::begin_drain() { impl_->begin_drain(); }
bool HttpServer::wait_idle(std::chrono::steady_clock::time_point deadline) {
  return impl_->wait_idle(deadline);
}
void HttpServer::stop() { impl_->stop(); }

bool HttpServer::shutdown(std::chrono::milliseconds grace) {
  stop_accepting();
  begin_drain();
  bool idle = wait_idle(std::chrono::steady_clock::now() + grace);
  stop();
  return idle;
}

std::size_t HttpServer::in_flight() const {
  std::lock_guard lock(impl_->ctx_->mu);
  return impl_->ctx_->in_flight.size();
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->ctx_->mu);
  return impl_->ctx_->connections.size();
}

void HttpServer::for_each_in_flight(
    const std::function<void(const std::shared_ptr<Exchange>&)>& fn) const {
  std::vector<std::shared_ptr<Exchange>> exchanges;
  {
    std::lock_guard lock(impl_->ctx_->mu);
    for (const auto& [id, weak] : impl_->ctx_->in_flight) {
      if (auto e = weak.lock()) exchanges.push_back(std::move(e));
    }
  }
  for (const auto& e : exchanges) fn(e);
}

}  // namespace fp4serve::http
