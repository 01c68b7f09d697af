#include "server/http/connection_exchange.h"

#include "server/http/connection.h"
#include "server/http/status_line.h"

namespace fp4serve::http {

ConnectionExchange::ConnectionExchange(std::shared_ptr<Connection> connection, HttpRequest request,
                                       std::uint64_t id)
    : connection_(std::move(connection)),
      request_(std::move(request)),
      id_(id),
      head_(request_.method == "HEAD") {}

void ConnectionExchange::add_cors_headers(const CorsPolicy& cors) {
  std::lock_guard lock(mu_);
  cors_ = &cors;
}

bool ConnectionExchange::respond(HttpResponse response) {
  std::lock_guard lock(mu_);
  if (state_ != State::pending || closed_) return false;
  state_ = State::done;
  if (cors_) cors_->decorate(request_, response.headers);
  connection_->post_response(std::move(response), head_);
  return true;
}

bool ConnectionExchange::start_stream(int status, std::vector<Header> headers,
                                      std::string content_type) {
  std::lock_guard lock(mu_);
  if (state_ != State::pending || closed_) return false;
  state_ = State::streaming;
  if (cors_) cors_->decorate(request_, headers);
  connection_->post_stream_head(status, std::move(headers), std::move(content_type));
  return true;
}

bool ConnectionExchange::write(std::string chunk) {
  std::lock_guard lock(mu_);
  if (state_ != State::streaming || closed_) return false;
  if (chunk.empty() || head_) return true;  // an answer to HEAD has no body (RFC 9110 9.3.2)
  std::string bytes = connection_->http10() ? std::move(chunk) : frame_chunk(chunk);
  return connection_->post_stream_bytes(std::move(bytes), false);
}

bool ConnectionExchange::finish(std::string last_chunk) {
  std::lock_guard lock(mu_);
  if (state_ != State::streaming || closed_) return false;
  state_ = State::done;
  std::string bytes;
  if (head_) {
    // No body, not even the terminating chunk: the client reads none after a HEAD.
  } else if (connection_->http10()) {
    bytes = std::move(last_chunk);
  } else {
    if (!last_chunk.empty()) bytes = frame_chunk(last_chunk);
    bytes.append(kLastChunk);
  }
  // The end of a response is never refused for back-pressure: it is small and it ends the stream.
  connection_->post_stream_bytes(std::move(bytes), true);
  return true;
}

void ConnectionExchange::on_close(std::function<void(CloseReason)> callback) {
  std::unique_lock lock(mu_);
  if (completed_ || state_ == State::done) return;
  if (closed_) {
    CloseReason reason = *closed_;
    lock.unlock();
    if (callback) connection_->run_soon([callback = std::move(callback), reason] { callback(reason); });
    return;
  }
  on_close_ = std::move(callback);
}

void ConnectionExchange::on_drain(std::function<void()> callback) {
  std::unique_lock lock(mu_);
  if (completed_ || closed_ || state_ == State::done) return;
  if (drain_requested_) {
    lock.unlock();
    if (callback) connection_->run_soon(std::move(callback));
    return;
  }
  on_drain_ = std::move(callback);
}

bool ConnectionExchange::closed() const {
  std::lock_guard lock(mu_);
  return closed_.has_value();
}

bool ConnectionExchange::answered() const {
  std::lock_guard lock(mu_);
  return state_ != State::pending;
}

void ConnectionExchange::notify_closed(CloseReason reason) {
  std::function<void(CloseReason)> callback;
  {
    std::lock_guard lock(mu_);
    if (closed_ || completed_) return;
    closed_ = reason;
    on_drain_ = nullptr;
    // A handler that already finished has nothing left to cancel.
    if (state_ != State::done) callback = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (callback) callback(reason);
}

void ConnectionExchange::notify_drain() {
  std::function<void()> callback;
  {
    std::lock_guard lock(mu_);
    if (drain_requested_ || closed_ || completed_) return;
    drain_requested_ = true;
    callback = std::move(on_drain_);
    on_drain_ = nullptr;
  }
  if (callback) callback();
}

void ConnectionExchange::notify_completed() {
  std::function<void(CloseReason)> close_cb;
  std::function<void()> drain_cb;
  {
    std::lock_guard lock(mu_);
    completed_ = true;
    close_cb = std::move(on_close_);  // destroyed outside the lock: they may own this exchange
    drain_cb = std::move(on_drain_);
    on_close_ = nullptr;
    on_drain_ = nullptr;
  }
}

}  // namespace fp4serve::http
