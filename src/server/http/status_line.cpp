#include "server/http/status_line.h"

#include <cstdio>
#include <stdexcept>

namespace fp4serve::http {

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Request Entity Too Large";
    case 414: return "Request-URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

namespace {

bool has_control_break(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

void append_header(std::string& out, std::string_view name, std::string_view value) {
  if (name.empty() || has_control_break(name) || has_control_break(value)) {
    throw std::invalid_argument("HTTP response header '" + std::string(name) +
                                "' has an empty name or contains CR/LF/NUL");
  }
  out.append(name).append(": ").append(value).append("\r\n");
}

bool is_framing_header(std::string_view name) {
  return field_name_equals(name, "content-length") || field_name_equals(name, "transfer-encoding") ||
         field_name_equals(name, "connection") || field_name_equals(name, "content-type");
}

}  // namespace

std::string serialize_head(unsigned version, int status, std::string_view content_type,
                           const std::vector<Header>& headers, BodyFraming framing,
                           std::size_t content_length, bool keep_alive) {
  if (status < 100 || status > 999) {
    throw std::invalid_argument("HTTP status " + std::to_string(status) + " is out of range");
  }
  std::string out;
  out.reserve(160 + headers.size() * 48);
  out.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  out.append(std::to_string(status)).append(" ").append(reason_phrase(status)).append("\r\n");
  if (!content_type.empty()) append_header(out, "content-type", content_type);
  // Handlers cannot override framing: the server owns Content-Length / Transfer-Encoding /
  // Connection, and Content-Type comes from its own argument.
  for (const Header& h : headers) {
    if (!is_framing_header(h.name)) append_header(out, h.name, h.value);
  }
  switch (framing) {
    case BodyFraming::content_length:
      append_header(out, "content-length", std::to_string(content_length));
      break;
    case BodyFraming::chunked:
      append_header(out, "transfer-encoding", "chunked");
      break;
    case BodyFraming::until_close:
      break;
  }
  if (!keep_alive) {
    append_header(out, "connection", "close");
  } else if (version == 10) {
    append_header(out, "connection", "keep-alive");
  }
  out.append("\r\n");
  return out;
}

std::string frame_chunk(std::string_view data) {
  char size_line[24];
  int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<std::size_t>(n) + data.size() + 2);
  out.append(size_line, static_cast<std::size_t>(n)).append(data).append("\r\n");
  return out;
}

}  // namespace fp4serve::http
