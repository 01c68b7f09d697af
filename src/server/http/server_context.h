// State shared by the server and its connections (internal to src/server/http). Connections hold
// it by shared_ptr, so the io_context outlives every socket even if an exchange is kept past stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <map>
#include <unordered_map>

#include <boost/asio/io_context.hpp>

#include "server/http/api_key_auth.h"
#include "server/http/connection_limits.h"
#include "server/http/http_server_config.h"
#include "server/http/router.h"

namespace fp4serve::http {

class Connection;
class ConnectionExchange;

struct ServerContext {
  ServerContext(HttpServerConfig cfg, Router r, unsigned threads)
      : io(static_cast<int>(threads)), config(std::move(cfg)), router(std::move(r)),
        auth(config.api_keys), max_connections(resolve_max_connections(config.max_connections)),
        accept_errors([this](const std::string& m) { log_error(m); }, std::chrono::seconds(10)) {}

  boost::asio::io_context io;
  const HttpServerConfig config;
  const Router router;
  const ApiKeyAuth auth;
  const std::size_t max_connections;
  RateLimitedLog accept_errors;
  std::atomic<bool> draining{false};
  std::atomic<std::uint64_t> next_id{1};

  mutable std::mutex mu;
  std::condition_variable changed;  // signalled when in_flight or connections shrink
  // Open connections by id. Ids grow with time, so the map's order is age (eviction takes the oldest).
  std::map<std::uint64_t, std::weak_ptr<Connection>> connections;
  std::size_t overflow_connections = 0;  // of those, taken past the cap (connection_limits.h)
  std::unordered_map<std::uint64_t, std::weak_ptr<ConnectionExchange>> in_flight;

  void log_error(const std::string& message) const {
    if (config.error_log) config.error_log(message);
  }
  void log_access(const AccessLogEntry& entry) const {
    if (config.access_log) config.access_log(entry);
  }
};

}  // namespace fp4serve::http
