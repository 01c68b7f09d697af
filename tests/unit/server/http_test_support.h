// Test-only helpers for the http_*_test.cpp suites: a blocking raw-socket HTTP/1.1 client that
// returns chunk boundaries as sent (so stream order can be checked), and a server fixture.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "server/http/http_server.h"

namespace fp4serve::http::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
  std::vector<std::string> chunks;             // chunk payloads when chunked
  bool chunked = false;

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class RawClient {
 public:
  explicit RawClient(unsigned short port) : socket_(io_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }

  void send(const std::string& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }

  void send_request(const std::string& method, const std::string& target,
                    const std::string& body = {}, const std::string& extra_headers = {}) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (!body.empty() || method == "POST") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    send(req);
  }

  ClientResponse request(const std::string& method, const std::string& target,
                         const std::string& body = {}, const std::string& extra_headers = {}) {
    send_request(method, target, body, extra_headers);
    return read_response(method == "HEAD");
  }

  // Reads one response; an answer to HEAD has headers only. Throws on EOF before a complete
  // response.
  ClientResponse read_response(bool to_head = false) {
    ClientResponse r;
    std::string head = read_until("\r\n\r\n");
    std::size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    r.status = std::stoi(status_line.substr(status_line.find(' ') + 1, 3));
    std::size_t pos = line_end + 2;
    while (pos < head.size() - 2) {
      std::size_t end = head.find("\r\n", pos);
      std::string line = head.substr(pos, end - pos);
      std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers[name] = value;
      pos = end + 2;
    }
    if (r.status == 100 || to_head) return r;
    if (r.header("transfer-encoding") == "chunked") {
      r.chunked = true;
      for (;;) {
        std::string size_line = read_until("\r\n");
        std::size_t size = std::stoul(size_line, nullptr, 16);
        if (size == 0) {
          read_until("\r\n");
          break;
        }
        std::string data = read_exact(size + 2).substr(0, size);
        r.chunks.push_back(data);
        r.body += data;
      }
    } else if (!r.header("content-length").empty()) {
      r.body = read_exact(std::stoul(r.header("content-length")));
    } else {
      r.body = read_to_eof();
    }
    return r;
  }

  // True when the server closed the connection (EOF or reset) with nothing more to read.
  bool at_eof() {
    if (!buffer_.empty()) return false;
    char c;
    boost::system::error_code ec;
    std::size_t n = socket_.read_some(boost::asio::buffer(&c, 1), ec);
    if (n > 0) {
      buffer_.push_back(c);
      return false;
    }
    return static_cast<bool>(ec);
  }

  std::string read_to_eof() {
    std::string out = std::move(buffer_);
    buffer_.clear();
    char tmp[4096];
    for (;;) {
      boost::system::error_code ec;
      std::size_t n = socket_.read_some(boost::asio::buffer(tmp), ec);
      out.append(tmp, n);
      if (ec) break;
    }
    return out;
  }

  void close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }
  // Close with RST instead of FIN.
  void reset() {
    socket_.set_option(boost::asio::socket_base::linger(true, 0));
    close();
  }
  boost::asio::ip::tcp::socket& socket() { return socket_; }

 private:
  std::string read_until(const std::string& delimiter) {
    for (;;) {
      std::size_t at = buffer_.find(delimiter);
      if (at != std::string::npos) {
        std::string out = buffer_.substr(0, at + delimiter.size());
        buffer_.erase(0, at + delimiter.size());
        return out;
      }
      fill();
    }
  }
  std::string read_exact(std::size_t n) {
    while (buffer_.size() < n) fill();
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }
  void fill() {
    char tmp[4096];
    boost::system::error_code ec;
    std::size_t n = socket_.read_some(boost::asio::buffer(tmp), ec);
    if (ec) throw std::runtime_error("connection ended: " + ec.message());
    buffer_.append(tmp, n);
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  std::string buffer_;
};

// Waits (polling) until the server has no open connection or `limit` passes; a connection is
// unregistered just after its socket closes, so a client that saw EOF may look a moment early.
inline std::size_t open_connections_after(const HttpServer& server, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (server.open_connections() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return server.open_connections();
}

inline HttpServerConfig test_config() {
  HttpServerConfig cfg;
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  cfg.io_threads = 2;
  return cfg;
}

inline HttpResponse text_response(int status, std::string body) {
  return HttpResponse{status, "text/plain", {}, std::move(body)};
}

// Threads of this process, from /proc/self/status.
inline int process_thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

}  // namespace fp4serve::http::testing
