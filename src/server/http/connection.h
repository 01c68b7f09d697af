// One accepted connection (internal), speaking HTTP/1.1 over a ByteStream: plain TCP, a Unix-domain
// socket or TLS (byte_stream.h). Everything here runs on the connection's strand, except the few
// methods marked "any thread", which only post onto it.
//
// A TLS connection handshakes first, under the request-head deadline (a client that connects and
// never handshakes is closed when it passes, with no answer: there is no channel to send a 408 on).
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

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/http/byte_stream.h"
#include "server/http/http_message.h"
#include "server/http/request_reader.h"
#include "server/http/server_context.h"

namespace fp4serve::http {

class ConnectionExchange;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Where the connection is in its current request; read from the acceptor to pick an eviction
  // victim (connection_limits.h), written on the strand.
  enum class Phase : std::uint8_t {
    idle,  // between requests (or none yet)
    head,  // request head arriving
    body,  // head complete, body arriving
    busy,  // request dispatched, response not yet completely written
  };

  // `overflow`: taken past the connection cap (short head deadline, probe paths only).
  Connection(std::shared_ptr<ServerContext> ctx, std::unique_ptr<ByteStream> stream, bool overflow);
  ~Connection();

  std::uint64_t id() const { return id_; }
  const boost::asio::any_io_executor& executor() { return executor_; }
  bool overflow() const { return overflow_; }
  // Any thread.
  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // Claims the connection as an eviction victim; false when another newcomer already did.
  bool claim_for_eviction() { return !evicting_.exchange(true); }

  // Strand only.
  void start();
  void close(CloseReason reason);
  void drain();  // server began draining: close if idle, else tell the exchange
  void evict();  // make room for a newcomer: close unless a request got dispatched meanwhile

  // Any thread (used by ConnectionExchange). Whole response / stream head: serialized on the strand
  // so keep-alive reflects the state when it is sent. head_only (the answer to HEAD): the head says
  // what the body would be, Content-Length included, and no body follows.
  void post_response(HttpResponse response, bool head_only);
  void post_stream_head(int status, std::vector<Header> headers, std::string content_type);
  // Returns false (and schedules a slow_reader close) when the per-connection cap is exceeded.
  bool post_stream_bytes(std::string bytes, bool ends_response);
  bool http10() const { return http10_; }
  // Runs fn on the strand later (never inside the caller, which may hold its own locks); inline
  // only once the io threads are gone.
  void run_soon(std::function<void()> fn);

 private:
  enum class TimerPhase { none, handshake, idle, head, body, write, linger };
  struct OutItem {
    std::string data;
    std::size_t stream_bytes = 0;  // counted against the back-pressure cap
    bool ends_response = false;
  };

  void on_handshake(boost::system::error_code ec);
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
  void arm_idle_timer();
  void set_phase(Phase phase) { phase_.store(phase, std::memory_order_release); }

  std::shared_ptr<ServerContext> ctx_;
  std::unique_ptr<ByteStream> stream_;
  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer timer_;
  std::uint64_t id_;
  std::string remote_;
  const bool overflow_;
  std::atomic<Phase> phase_{Phase::idle};
  std::atomic<bool> evicting_{false};

  static constexpr std::size_t kReadScratchBytes = 8 * 1024;
  std::array<char, kReadScratchBytes> read_scratch_;
  boost::beast::flat_buffer buffer_;  // received, not yet parsed
  std::optional<RequestParser> parser_;  // request_reader.h
  bool continue_sent_ = false;
  bool reading_ = false;
  bool closed_ = false;
  bool lingering_ = false;
  bool linger_reads_ = true;  // while lingering, read and discard (plain half-close); TLS: no

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
