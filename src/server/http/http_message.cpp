#include "server/http/http_message.h"

#include <cstdio>

#include "server/http/status_line.h"

namespace fp4serve::http {

namespace {
char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool field_name_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const Header& h : headers) {
    if (field_name_equals(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

const char* to_string(CloseReason reason) {
  switch (reason) {
    case CloseReason::client_closed: return "client_closed";
    case CloseReason::timeout: return "timeout";
    case CloseReason::slow_reader: return "slow_reader";
    case CloseReason::server_shutdown: return "server_shutdown";
    case CloseReason::io_error: return "io_error";
  }
  return "unknown";
}

std::string uvicorn_style_access_line(const AccessLogEntry& e) {
  char tail[64];
  std::snprintf(tail, sizeof tail, " %.1f ms%s", e.duration_ms, e.completed ? "" : " (incomplete)");
  std::string line = e.remote_address + " - \"" + e.method + " " + e.target + " HTTP/" +
                     (e.version == 10 ? "1.0" : "1.1") + "\" " + std::to_string(e.status);
  if (e.status != 0) line.append(" ").append(reason_phrase(e.status));
  return line + tail;
}

}  // namespace fp4serve::http
