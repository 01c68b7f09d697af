// Exchange implementation bound to a Connection (internal). Caller-side state lives under a mutex,
// and each call posts to the connection's strand while holding it, so calls from different threads
// reach the socket in the order their state changes were made (a chunk can never overtake its head).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "server/http/exchange.h"

namespace fp4serve::http {

class Connection;

class ConnectionExchange : public Exchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> connection, HttpRequest request, std::uint64_t id);

  const HttpRequest& request() const override { return request_; }
  bool respond(HttpResponse response) override;
  bool start_stream(int status, std::vector<Header> headers, std::string content_type) override;
  bool write(std::string chunk) override;
  bool finish(std::string last_chunk) override;
  void on_close(std::function<void(CloseReason)> callback) override;
  void on_drain(std::function<void()> callback) override;
  bool closed() const override;

  std::uint64_t id() const { return id_; }
  bool answered() const;  // respond() or start_stream() was called

  // Connection side (strand).
  void notify_closed(CloseReason reason);  // fires on_close unless the handler already finished
  void notify_drain();
  void notify_completed();                 // response fully written: drop callbacks

 private:
  enum class State { pending, streaming, done };

  std::shared_ptr<Connection> connection_;
  const HttpRequest request_;
  const std::uint64_t id_;
  const bool head_;  // a HEAD request: headers as for GET, and no body bytes at all

  mutable std::mutex mu_;
  State state_ = State::pending;
  std::optional<CloseReason> closed_;
  bool completed_ = false;
  bool drain_requested_ = false;
  std::function<void(CloseReason)> on_close_;
  std::function<void()> on_drain_;
};

}  // namespace fp4serve::http
