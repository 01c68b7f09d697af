// One accepted TCP connection (internal). Everything here runs on the connection's strand, except
// the few methods marked "any thread", which only post onto it.
//
// One read is kept outstanding at all times (except while lingering or when pipelined bytes exceed
// the cap): between requests it waits for the next one (keep-alive timeout), during a request it
// feeds the parser (request timeout), and while a response is pending it notices the client going
// away (EOF / reset), which is what makes Exchange::on_close fire within milliseconds.
// All output (100 Continue, heads, bodies, chunks) goes through one queue, written in order with
// gathered writes.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/dynamic_body.hpp>

#include "server/http/http_message.h"
#include "server/http/server_context.h"

namespace fp4serve::http {

class ConnectionExchange;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerContext> ctx, boost::asio::ip::tcp::socket socket);
  ~Connection();

  std::uint64_t id() const { return id_; }
  const boost::asio::any_io_executor& executor() { return executor_; }

  // Strand only.
  void start();
  void close(CloseReason reason);
  void drain();  // server began draining: close if idle, else tell the exchange

  // Any thread (used by ConnectionExchange). Whole response / stream head: serialized on the strand
  // so keep-alive reflects the state when it is sent.
  void post_response(HttpResponse response);
  void post_stream_head(int status, std::vector<Header> headers, std::string content_type);
  // Returns false (and schedules a slow_reader close) when the per-connection cap is exceeded.
  bool post_stream_bytes(std::string bytes, bool ends_response);
  bool http10() const { return http10_; }
  // Runs fn on the strand later (never inside the caller, which may hold its own locks); inline
  // only once the io threads are gone.
  void run_soon(std::function<void()> fn);

 private:
  enum class TimerPhase { none, idle, request, write, linger };
  struct OutItem {
    std::string data;
    std::size_t stream_bytes = 0;  // counted against the back-pressure cap
    bool ends_response = false;
  };

  void do_read();
  void on_read(boost::system::error_code ec, std::size_t n);
  void parse_buffered();
  void on_parse_error(boost::system::error_code ec);
  void dispatch_request();
  void run_handler(const std::shared_ptr<ConnectionExchange>& exchange);
  void maybe_send_continue();

  void enqueue(OutItem item);
  void do_write();
  void on_write(boost::system::error_code ec, std::size_t n, std::size_t items);
  void finish_response();
  void send_transport_error(int status, std::string body, const char* method, const char* target);
  void graceful_close();

  void arm_timer(TimerPhase phase, std::chrono::milliseconds after);
  void cancel_timer();
  void on_timer(std::uint64_t generation);
  void arm_wait_timer();  // idle or request timeout, depending on buffered bytes

  std::shared_ptr<ServerContext> ctx_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer timer_;
  std::uint64_t id_;
  std::string remote_;

  static constexpr std::size_t kReadScratchBytes = 8 * 1024;
  std::array<char, kReadScratchBytes> read_scratch_;
  boost::beast::flat_buffer buffer_;  // received, not yet parsed
  // A dynamic body grows as bytes arrive; string_body would reserve the announced Content-Length
  // up front, letting idle clients claim max_body_bytes each without sending them.
  using RequestBody = boost::beast::http::basic_dynamic_body<boost::beast::flat_buffer>;
  std::optional<boost::beast::http::request_parser<RequestBody>> parser_;
  bool continue_sent_ = false;
  bool reading_ = false;
  bool closed_ = false;
  bool lingering_ = false;

  TimerPhase timer_phase_ = TimerPhase::none;
  std::uint64_t timer_generation_ = 0;

  std::shared_ptr<ConnectionExchange> exchange_;  // the request in flight
  std::chrono::steady_clock::time_point request_done_at_;
  int response_status_ = 0;
  bool response_keep_alive_ = true;
  std::uint64_t response_body_bytes_ = 0;
  std::atomic<bool> http10_{false};

  std::deque<OutItem> out_;
  bool writing_ = false;
  std::atomic<std::size_t> queued_stream_bytes_{0};
};

}  // namespace fp4serve::http
