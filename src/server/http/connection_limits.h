// How many connections the server keeps open, and what it says when it cannot take more.
//
// Every connection costs a file descriptor. Without a cap, a few hundred clients that open a socket
// and trickle bytes (slow-loris) exhaust RLIMIT_NOFILE: accept() then fails with EMFILE, /health
// stops answering and the log fills with "Too many open files". The policy (applied by HttpServer):
//   1. At most max_connections are open. The default leaves kReservedFds of the descriptor limit
//      for the rest of the process and for the overflow below.
//   2. A connection past the cap first evicts the oldest connection that has no request in flight
//      (an idle keep-alive connection, or one whose request is still arriving), as nginx reuses idle
//      keep-alive connections when it runs out.
//   3. When every open connection has a request in flight, the newcomer is an "overflow" connection:
//      its request head must arrive within kOverflowHeadTimeout, a probe path (/health, /ping) is
//      answered as usual, anything else gets 503 with Retry-After. At most kMaxOverflow of those at
//      once; beyond that the 503 is written at once and the socket closed, without reading.
//   Request heads and bodies have deadlines of their own (HttpServerConfig), so a trickling
//   connection ends even when nobody needs its slot.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace fp4serve::http {

inline constexpr std::size_t kReservedFds = 128;
inline constexpr std::size_t kMaxOverflow = 64;
inline constexpr std::chrono::milliseconds kOverflowHeadTimeout{2000};

// The soft RLIMIT_NOFILE (0 when unlimited or unknown).
std::size_t open_file_limit();

// vLLM's set_ulimit: raise the soft descriptor limit towards `target` (never above the hard
// limit). Returns the soft limit in force afterwards.
std::size_t raise_open_file_limit(std::size_t target = 65535);

// `configured` when non-zero; else the descriptor limit minus kReservedFds (at least 16); else
// (no limit) 65536.
std::size_t resolve_max_connections(std::size_t configured);

// The complete 503 response (Connection: close, Retry-After) for a connection the server cannot
// take; `open` is the number of open connections, for the message.
std::string connection_limit_response(std::size_t open, std::size_t max_connections);

// Logs the first message, then at most one per `interval`, reporting how many were suppressed in
// between: accept() failing in a loop must not flood the log.
class RateLimitedLog {
 public:
  RateLimitedLog(std::function<void(const std::string&)> sink, std::chrono::milliseconds interval)
      : sink_(std::move(sink)), interval_(interval) {}
  void log(const std::string& message);

 private:
  std::function<void(const std::string&)> sink_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  bool logged_once_ = false;
  std::uint64_t suppressed_ = 0;
};

}  // namespace fp4serve::http
