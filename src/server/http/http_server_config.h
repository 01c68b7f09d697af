// Settings of the HTTP transport. Defaults follow uvicorn as vLLM runs it where one exists
// (keep-alive idle timeout 5 s = VLLM_HTTP_TIMEOUT_KEEP_ALIVE); the size limits are ours (uvicorn
// has none) and are generous enough for long prompts.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "server/http/http_message.h"

namespace fp4serve::http {

struct HttpServerConfig {
  std::string host = "0.0.0.0";
  unsigned short port = 8000;  // 0 = ephemeral; HttpServer::port() reports the bound one
  unsigned io_threads = 0;     // 0 = min(4, hardware threads)

  std::size_t max_header_bytes = 64 * 1024;        // request line + headers; over -> 431
  std::size_t max_body_bytes = 32 * 1024 * 1024;   // over -> 413
  // Unsent response bytes allowed to queue per connection before a slow client is dropped
  // (see the back-pressure policy in exchange.h).
  std::size_t max_stream_buffer_bytes = 8 * 1024 * 1024;

  std::chrono::milliseconds keep_alive_timeout{5000};  // idle between requests, then close
  // Slow-loris bounds, each answered with 408 and a close: the request head (request line and
  // headers) must be complete this long after its first byte, and the body this long after the head.
  std::chrono::milliseconds request_head_timeout{10000};
  std::chrono::milliseconds request_body_timeout{60000};
  // A gathered socket write (at most 64 queued pieces / 1 MiB) that does not complete in this time
  // closes the connection (CloseReason::timeout): the client stopped reading.
  std::chrono::milliseconds write_timeout{60000};
  std::chrono::milliseconds linger_timeout{1000};      // reading leftovers after a final response

  // Open connections at most; 0 = the descriptor limit minus a reserve (connection_limits.h has the
  // whole policy: eviction of connections without a request in flight, then 503s).
  std::size_t max_connections = 0;
  // Paths answered even on a connection taken past the cap (load balancers' probes).
  std::vector<std::string> probe_paths = {"/health", "/ping"};

  // API keys (vLLM --api-key / VLLM_API_KEY); empty = no authentication.
  std::vector<std::string> api_keys;

  // Called on an io thread for every response that completes or is cut off. Keep it cheap.
  std::function<void(const AccessLogEntry&)> access_log;
  // Called on an io thread for server-side faults (handler exceptions, accept errors).
  std::function<void(const std::string&)> error_log;
};

}  // namespace fp4serve::http
