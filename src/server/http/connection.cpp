#include "server/http/connection.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include "server/http/connection_exchange.h"
#include "server/http/error_bodies.h"
#include "server/http/request_reader.h"
#include "server/http/request_target.h"
#include "server/http/status_line.h"

namespace fp4serve::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::size_t kMaxItemsPerWrite = 64;
constexpr std::size_t kMaxBytesPerWrite = 1024 * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

bool iequals(std::string_view a, std::string_view b) { return field_name_equals(a, b); }

bool is_peer_gone(const error_code& ec) {
  return ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::connection_aborted;
}

}  // namespace

Connection::Connection(std::shared_ptr<ServerContext> ctx, std::unique_ptr<ByteStream> stream, bool overflow)
    : ctx_(std::move(ctx)),
      stream_(std::move(stream)),
      executor_(stream_->get_executor()),
      timer_(executor_),
      id_(ctx_->next_id.fetch_add(1)),
      remote_(stream_->remote_address()),
      overflow_(overflow),
      buffer_(ctx_->config.max_header_bytes + kReadScratchBytes) {}

Connection::~Connection() {
  // Every ending goes through close(), which unregisters; this keeps the count honest if one ever
  // does not (a stale entry would hold a slot of the connection cap forever).
  if (!closed_) {
    std::lock_guard lock(ctx_->mu);
    if (ctx_->connections.erase(id_) > 0 && overflow_) --ctx_->overflow_connections;
  }
}

// The server registered the connection in ctx_->connections when it accepted it.
void Connection::start() {
  if (ctx_->draining) {
    graceful_close();
    return;
  }
  if (stream_->needs_handshake()) {
    // The handshake counts as the start of a request head: its deadline bounds a client that
    // connects and then sends nothing (or trickles the handshake), and the connection may be
    // evicted meanwhile like one whose head is arriving.
    set_phase(Phase::head);
    arm_timer(TimerPhase::handshake, overflow_ ? std::min(kOverflowHeadTimeout, ctx_->config.request_head_timeout)
                                               : ctx_->config.request_head_timeout);
    stream_->async_handshake([self = shared_from_this()](error_code ec) { self->on_handshake(ec); });
    return;
  }
  arm_idle_timer();
  do_read();
}

void Connection::on_handshake(error_code ec) {
  if (closed_) return;
  if (ec) {
    // Not TLS, an unknown CA, no client certificate under --ssl-cert-reqs 2, ...: nothing to answer.
    close(is_peer_gone(ec) ? CloseReason::client_closed : CloseReason::io_error);
    return;
  }
  set_phase(Phase::idle);
  if (ctx_->draining) {
    graceful_close();
    return;
  }
  arm_idle_timer();
  do_read();
}

// ---------------------------------------------------------------- reading

void Connection::do_read() {
  if (reading_ || closed_) return;
  std::size_t room = buffer_.max_size() - buffer_.size();
  if (room == 0) return;  // pipelined bytes at the cap: resume after the current response
  reading_ = true;
  // Read into a fixed scratch area, never into buffer_ itself: the parser consumes from buffer_
  // while this read is outstanding, and flat_buffer moves its contents when it is emptied.
  stream_->async_read_some(net::buffer(read_scratch_.data(), std::min(room, read_scratch_.size())),
                           [self = shared_from_this()](error_code ec, std::size_t n) {
                             self->on_read(ec, n);
                           });
}

void Connection::on_read(error_code ec, std::size_t n) {
  reading_ = false;
  if (closed_) return;
  if (n > 0 && !lingering_) {
    // Fits: do_read asked for at most the room left, and buffer_ only shrinks meanwhile.
    net::buffer_copy(buffer_.prepare(n), net::buffer(read_scratch_.data(), n));
    buffer_.commit(n);
  }
  if (ec) {
    // EOF or reset. With a response pending this is the client going away (half-close included,
    // as uvicorn treats it); otherwise the connection simply ends.
    close(is_peer_gone(ec) ? CloseReason::client_closed : CloseReason::io_error);
    return;
  }
  if (lingering_) {
    if (linger_reads_) do_read();
    return;
  }
  if (exchange_) {
    do_read();  // pipelined bytes wait in the buffer; keep watching for the client leaving
    return;
  }
  parse_buffered();
}

void Connection::parse_buffered() {
  if (closed_ || lingering_ || exchange_) return;
  if (!parser_) {
    if (buffer_.size() == 0) {
      arm_idle_timer();
      do_read();
      return;
    }
    parser_.emplace();
    configure_request_parser(*parser_, ctx_->config);
    continue_sent_ = false;
    set_phase(Phase::head);
    arm_timer(TimerPhase::head, overflow_ ? std::min(kOverflowHeadTimeout, ctx_->config.request_head_timeout)
                                          : ctx_->config.request_head_timeout);
  }
  error_code ec;
  switch (feed_request_parser(*parser_, buffer_, ec)) {
    case ParseProgress::failed:
      on_parse_error(ec);
      return;
    case ParseProgress::done:
      dispatch_request();
      return;
    case ParseProgress::need_more:
      break;
  }
  if (parser_->is_header_done()) {
    if (phase() == Phase::head) {
      // The body gets its own deadline from here (a trickled body is a slow-loris too).
      set_phase(Phase::body);
      arm_timer(TimerPhase::body, ctx_->config.request_body_timeout);
    }
    maybe_send_continue();
  }
  do_read();
}

void Connection::maybe_send_continue() {
  // curl sends "Expect: 100-continue" for bodies over 1 KiB and waits a second for this line.
  if (continue_sent_ || parser_->get().version() != 11) return;
  auto expect = parser_->get()[bhttp::field::expect];
  if (!iequals(std::string_view(expect.data(), expect.size()), "100-continue")) return;
  continue_sent_ = true;
  enqueue(OutItem{std::string(kContinue), 0, false});
}

void Connection::on_parse_error(error_code ec) {
  const char* method = "-";
  const char* target = "-";
  if (ec == bhttp::error::body_limit) {
    send_transport_error(413,
                         envelope_error_body(413, "Request body exceeds the limit of " +
                                                      std::to_string(ctx_->config.max_body_bytes) +
                                                      " bytes"),
                         method, target);
  } else if (ec == bhttp::error::header_limit) {
    send_transport_error(431,
                         envelope_error_body(431, "Request header fields exceed the limit of " +
                                                      std::to_string(ctx_->config.max_header_bytes) +
                                                      " bytes"),
                         method, target);
  } else {
    send_transport_error(400, envelope_error_body(400, "Invalid HTTP request: " + ec.message()),
                         method, target);
  }
}

void Connection::dispatch_request() {
  auto message = parser_->release();
  parser_.reset();
  cancel_timer();
  set_phase(Phase::busy);
  request_done_at_ = std::chrono::steady_clock::now();

  HttpRequest request = to_http_request(std::move(message), remote_);
  request.path = route_path(request.path, ctx_->config.root_path);
  http10_ = request.version == 10;
  response_status_ = 0;
  response_body_bytes_ = 0;
  response_keep_alive_ = request.keep_alive && !overflow_;

  auto exchange = std::make_shared<ConnectionExchange>(shared_from_this(), std::move(request),
                                                       ctx_->next_id.fetch_add(1));
  exchange_ = exchange;
  {
    std::lock_guard lock(ctx_->mu);
    ctx_->in_flight[exchange->id()] = exchange;
  }
  do_read();  // watch for the client leaving while the response is produced
  run_handler(exchange);
}

void Connection::run_handler(const std::shared_ptr<ConnectionExchange>& exchange) {
  const HttpRequest& req = exchange->request();
  if (ctx_->draining) {
    exchange->respond(HttpResponse{503, "application/json", {},
                                   envelope_error_body(503, "The server is shutting down")});
    return;
  }
  if (overflow_ && std::find(ctx_->config.probe_paths.begin(), ctx_->config.probe_paths.end(), req.path) ==
                       ctx_->config.probe_paths.end()) {
    std::size_t open = 0;
    {
      std::lock_guard lock(ctx_->mu);
      open = ctx_->connections.size();
    }
    exchange->respond(HttpResponse{
        503, "application/json", {{"retry-after", "1"}},
        envelope_error_body(503, "The server is at its connection limit (" + std::to_string(open) +
                                     " open, at most " + std::to_string(ctx_->max_connections) +
                                     "); retry later")});
    return;
  }
  // vLLM's middleware order: the API-key check (never for OPTIONS; its 401 has no CORS headers),
  // then CORS (preflights answered whatever the path), then routing.
  if (!ctx_->auth.allows(req.method, req.path, req.header("authorization"))) {
    exchange->respond(HttpResponse{401, "application/json", {}, unauthorized_error_body()});
    return;
  }
  if (CorsPolicy::applies(req)) {
    if (std::optional<HttpResponse> preflight = ctx_->cors.preflight(req)) {
      exchange->respond(std::move(*preflight));
      return;
    }
    exchange->add_cors_headers(ctx_->cors);
  }
  Router::Match match = ctx_->router.match(req.method, req.path);
  if (!match.handler) {
    if (!match.path_known()) {
      exchange->respond(HttpResponse{404, "application/json", {}, detail_error_body("Not Found")});
    } else {
      std::string allow;
      for (const std::string& m : match.allowed) allow += (allow.empty() ? "" : ", ") + m;
      exchange->respond(HttpResponse{405, "application/json", {{"allow", allow}},
                                     detail_error_body("Method Not Allowed")});
    }
    return;
  }
  try {
    (*match.handler)(exchange);
  } catch (const std::exception& e) {
    ctx_->log_error("handler for " + req.method + " " + req.path + " threw: " + e.what());
    if (!exchange->respond(HttpResponse{500, "application/json", {},
                                        envelope_error_body(500, "Internal server error")})) {
      exchange->finish({});  // a stream that had started: end it rather than hang
    }
  } catch (...) {
    ctx_->log_error("handler for " + req.method + " " + req.path + " threw a non-std exception");
    if (!exchange->respond(HttpResponse{500, "application/json", {},
                                        envelope_error_body(500, "Internal server error")})) {
      exchange->finish({});
    }
  }
}

// ---------------------------------------------------------------- writing (any thread -> strand)

void Connection::post_response(HttpResponse response, bool head_only) {
  net::post(executor_, [self = shared_from_this(), response = std::move(response), head_only]() mutable {
    if (self->closed_) return;
    self->response_keep_alive_ = self->response_keep_alive_ && !self->ctx_->draining;
    std::string head;
    try {
      head = serialize_head(self->http10_ ? 10 : 11, response.status, response.content_type,
                            response.headers, BodyFraming::content_length, response.body.size(),
                            self->response_keep_alive_);
    } catch (const std::exception& e) {
      self->ctx_->log_error(std::string("bad response from handler: ") + e.what());
      response.status = 500;
      response.body = envelope_error_body(500, "Internal server error");
      head = serialize_head(self->http10_ ? 10 : 11, 500, "application/json", {},
                            BodyFraming::content_length, response.body.size(),
                            self->response_keep_alive_);
    }
    self->response_status_ = response.status;
    // HEAD: the head says what GET would send (Content-Length included) and no body follows; a
    // body here would be read as the start of the next response (aiohttp: "BadStatusLine").
    if (!head_only) {
      self->response_body_bytes_ = response.body.size();
      head.append(response.body);
    }
    self->enqueue(OutItem{std::move(head), 0, true});
  });
}

void Connection::post_stream_head(int status, std::vector<Header> headers, std::string content_type) {
  net::post(executor_, [self = shared_from_this(), status, headers = std::move(headers),
                        content_type = std::move(content_type)]() mutable {
    if (self->closed_) return;
    // HTTP/1.0 has no chunked encoding: the body ends when the connection does.
    bool chunked = !self->http10_;
    self->response_keep_alive_ = chunked && self->response_keep_alive_ && !self->ctx_->draining;
    std::string head;
    try {
      head = serialize_head(self->http10_ ? 10 : 11, status, content_type, headers,
                            chunked ? BodyFraming::chunked : BodyFraming::until_close, 0,
                            self->response_keep_alive_);
    } catch (const std::exception& e) {
      self->ctx_->log_error(std::string("bad stream head from handler: ") + e.what());
      status = 500;
      head = serialize_head(self->http10_ ? 10 : 11, 500, content_type, {},
                            chunked ? BodyFraming::chunked : BodyFraming::until_close, 0,
                            self->response_keep_alive_);
    }
    self->response_status_ = status;
    self->enqueue(OutItem{std::move(head), 0, false});
  });
}

bool Connection::post_stream_bytes(std::string bytes, bool ends_response) {
  std::size_t size = bytes.size();
  std::size_t queued = queued_stream_bytes_.fetch_add(size) + size;
  if (!ends_response && queued > ctx_->config.max_stream_buffer_bytes) {
    queued_stream_bytes_.fetch_sub(size);
    net::post(executor_, [self = shared_from_this()] { self->close(CloseReason::slow_reader); });
    return false;
  }
  net::post(executor_, [self = shared_from_this(), bytes = std::move(bytes), size,
                        ends_response]() mutable {
    if (self->closed_) {
      self->queued_stream_bytes_.fetch_sub(size);
      return;
    }
    self->response_body_bytes_ += size;
    self->enqueue(OutItem{std::move(bytes), size, ends_response});
  });
  return true;
}

void Connection::run_soon(std::function<void()> fn) {
  if (ctx_->io.stopped()) {
    fn();
    return;
  }
  net::post(executor_, std::move(fn));
}

// ---------------------------------------------------------------- writing (strand)

void Connection::enqueue(OutItem item) {
  if (closed_) {
    queued_stream_bytes_.fetch_sub(item.stream_bytes);
    return;
  }
  out_.push_back(std::move(item));
  if (!writing_) do_write();
}

void Connection::do_write() {
  if (out_.empty() || closed_) return;
  std::vector<net::const_buffer> buffers;
  std::size_t bytes = 0;
  std::size_t items = 0;
  for (const OutItem& item : out_) {
    if (items == kMaxItemsPerWrite || (items > 0 && bytes + item.data.size() > kMaxBytesPerWrite)) break;
    buffers.push_back(net::buffer(item.data));
    bytes += item.data.size();
    ++items;
  }
  writing_ = true;
  if (exchange_) arm_timer(TimerPhase::write, ctx_->config.write_timeout);
  stream_->async_write(std::move(buffers), [self = shared_from_this(), items](error_code ec, std::size_t n) {
    self->on_write(ec, n, items);
  });
}

void Connection::on_write(error_code ec, std::size_t n, std::size_t items) {
  writing_ = false;
  if (closed_) return;
  if (ec) {
    close(is_peer_gone(ec) ? CloseReason::client_closed : CloseReason::io_error);
    return;
  }
  bool ended = false;
  for (std::size_t i = 0; i < items && !out_.empty(); ++i) {
    queued_stream_bytes_.fetch_sub(out_.front().stream_bytes);
    ended = ended || out_.front().ends_response;
    out_.pop_front();
  }
  if (timer_phase_ == TimerPhase::write) cancel_timer();
  if (ended) {
    finish_response();
    if (closed_) return;
  }
  if (!out_.empty()) do_write();
}

void Connection::finish_response() {
  if (exchange_) {
    const HttpRequest& req = exchange_->request();
    AccessLogEntry entry{remote_, req.method, req.target, req.version, response_status_,
                         response_body_bytes_,
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                   request_done_at_)
                             .count(),
                         true};
    exchange_->notify_completed();
    {
      std::lock_guard lock(ctx_->mu);
      ctx_->in_flight.erase(exchange_->id());
    }
    ctx_->changed.notify_all();
    exchange_.reset();
    ctx_->log_access(entry);
  }
  set_phase(Phase::idle);
  // While draining, a connection ends with its response even if its head promised keep-alive.
  if (!response_keep_alive_ || ctx_->draining) {
    graceful_close();
    return;
  }
  parse_buffered();  // a pipelined request may already be waiting
}

void Connection::send_transport_error(int status, std::string body, const char* method,
                                      const char* target) {
  parser_.reset();
  cancel_timer();
  set_phase(Phase::busy);  // its response is being written
  response_keep_alive_ = false;  // the rest of the byte stream cannot be trusted
  response_status_ = status;
  response_body_bytes_ = body.size();
  std::string bytes = serialize_head(11, status, "application/json", {},
                                     BodyFraming::content_length, body.size(), false);
  bytes.append(body);
  ctx_->log_access(AccessLogEntry{remote_, method, target, 11, status, body.size(), 0.0, true});
  enqueue(OutItem{std::move(bytes), 0, true});
}

void Connection::graceful_close() {
  if (closed_ || lingering_) return;
  if (writing_ || !out_.empty()) {
    response_keep_alive_ = false;  // finish_response will come back here
    return;
  }
  // Plain sockets half-close, then read and discard until the peer closes (or linger_timeout), so
  // that a client still sending a rejected body gets our response instead of a reset. TLS sends
  // close_notify and waits for the peer's, within the same linger_timeout.
  lingering_ = true;
  linger_reads_ = false;  // a read still outstanding ends here, unless the stream asks for more
  buffer_.consume(buffer_.size());
  arm_timer(TimerPhase::linger, ctx_->config.linger_timeout);
  stream_->async_shutdown([self = shared_from_this()](error_code ec, bool read_until_eof) {
    if (self->closed_) return;
    if (ec || !read_until_eof) {
      self->close(CloseReason::client_closed);
      return;
    }
    self->linger_reads_ = true;
    self->do_read();
  });
}

void Connection::close(CloseReason reason) {
  if (closed_) return;
  closed_ = true;
  cancel_timer();
  stream_->close();
  for (const OutItem& item : out_) queued_stream_bytes_.fetch_sub(item.stream_bytes);
  out_.clear();
  parser_.reset();
  std::shared_ptr<ConnectionExchange> exchange = std::move(exchange_);
  exchange_.reset();
  {
    std::lock_guard lock(ctx_->mu);
    if (ctx_->connections.erase(id_) > 0 && overflow_) --ctx_->overflow_connections;
    if (exchange) ctx_->in_flight.erase(exchange->id());
  }
  ctx_->changed.notify_all();
  if (exchange) {
    const HttpRequest& req = exchange->request();
    ctx_->log_access(AccessLogEntry{
        remote_, req.method, req.target, req.version, response_status_, response_body_bytes_,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - request_done_at_)
            .count(),
        false});
    exchange->notify_closed(reason);
  }
}

void Connection::drain() {
  if (closed_) return;
  if (exchange_) {
    exchange_->notify_drain();
  } else if (!writing_ && out_.empty()) {
    parser_.reset();  // a request still arriving is refused by closing, like an idle connection
    graceful_close();
  }
}

void Connection::evict() {
  // A request may have been dispatched since the acceptor picked this connection: it keeps running.
  if (closed_ || exchange_ || phase() == Phase::busy) {
    evicting_ = false;
    return;
  }
  close(CloseReason::server_shutdown);  // no exchange: nobody is notified
}

// ---------------------------------------------------------------- timers

void Connection::arm_idle_timer() {
  arm_timer(TimerPhase::idle, overflow_ ? std::min(kOverflowHeadTimeout, ctx_->config.keep_alive_timeout)
                                        : ctx_->config.keep_alive_timeout);
}

void Connection::arm_timer(TimerPhase phase, std::chrono::milliseconds after) {
  timer_phase_ = phase;
  std::uint64_t generation = ++timer_generation_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (!ec) self->on_timer(generation);
  });
}

void Connection::cancel_timer() {
  timer_phase_ = TimerPhase::none;
  ++timer_generation_;
  timer_.cancel();
}

void Connection::on_timer(std::uint64_t generation) {
  if (closed_ || generation != timer_generation_) return;
  TimerPhase phase = timer_phase_;
  timer_phase_ = TimerPhase::none;
  switch (phase) {
    case TimerPhase::idle:
      graceful_close();
      break;
    case TimerPhase::head:
    case TimerPhase::body:
      if (!writing_ && out_.empty()) {
        send_transport_error(408,
                             envelope_error_body(408, phase == TimerPhase::head
                                                          ? "Timed out reading the request head"
                                                          : "Timed out reading the request body"),
                             "-", "-");
      } else {
        close(CloseReason::timeout);
      }
      break;
    case TimerPhase::handshake:  // no TLS session to carry a 408: just close
    case TimerPhase::write:
      close(CloseReason::timeout);
      break;
    case TimerPhase::linger:
      close(CloseReason::client_closed);
      break;
    case TimerPhase::none:
      break;
  }
}

}  // namespace fp4serve::http
