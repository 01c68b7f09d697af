// Transport-level request and response values handed between the HTTP server and its handlers.
// Plain data, no Boost types, so that route code includes this without pulling in Beast.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4serve::http {

struct Header {
  std::string name;
  std::string value;
};

// HTTP field names compare case-insensitively (RFC 9110 section 5.1).
bool field_name_equals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;   // as sent, e.g. "POST" (methods are case-sensitive tokens)
  std::string target;   // raw request-target, e.g. "/v1/models?x=1"
  std::string path;     // target before '?', percent-decoded (what routing and auth look at)
  std::string query;    // target after '?', raw (empty when none)
  unsigned version = 11;  // 10 or 11
  std::vector<Header> headers;  // in arrival order
  std::string body;
  std::string remote_address;  // "ip:port" of the peer
  bool keep_alive = true;      // what the client asked for

  // First value of a header (case-insensitive name), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;  // extra headers; Content-Length/Transfer-Encoding are set by the server
  std::string body;
};

// Why a response ended before it was complete (the argument of Exchange::on_close).
enum class CloseReason {
  client_closed,    // peer closed or reset the connection (includes half-close, like uvicorn)
  timeout,          // a socket write made no progress within the write timeout
  slow_reader,      // the stream's unsent bytes exceeded the per-stream cap (back-pressure policy)
  server_shutdown,  // the drain deadline passed and the server closed the connection
  io_error,         // any other socket error
};

const char* to_string(CloseReason reason);

// One line of access log, produced when a response completes or is cut off.
struct AccessLogEntry {
  std::string remote_address;
  std::string method;
  std::string target;
  unsigned version = 11;
  int status = 0;             // 0 when no status line was sent before the connection ended
  std::uint64_t body_bytes = 0;  // response payload bytes queued (chunk payloads for streams)
  double duration_ms = 0;     // from the request being fully read to the end of the response
  bool completed = true;      // false when the connection ended before the response did
};

// The line uvicorn logs for a request (what vLLM users grep for), e.g.
//   127.0.0.1:42596 - "POST /v1/chat/completions HTTP/1.1" 200 OK
// followed here by the duration and, when cut off, " (incomplete)".
std::string uvicorn_style_access_line(const AccessLogEntry& entry);

}  // namespace fp4serve::http
