// The handler's side of one request: answer it whole, or stream it, and learn when the client leaves.
//
// Threading: every method may be called from any thread (the engine thread, a notifier, the io
// thread running the handler). Calls never block on the network: they queue work onto the
// connection's strand and return. Calls made from one thread are sent in the order they were made.
//
// Life cycle: exactly one of
//   respond(response)                                   -- a whole response, or
//   start_stream(...), write(chunk)*, finish(last)      -- chunked transfer encoding.
// Calls that do not fit the state (write before start_stream, a second respond, anything after the
// connection closed) do nothing and return false; a false write tells the producer to stop.
//
// Back-pressure policy (documented contract): bytes queued by write() but not yet accepted by the
// socket are counted per connection. When a write would push them past
// HttpServerConfig::max_stream_buffer_bytes the server gives up on that client: the connection is
// closed, on_close(CloseReason::slow_reader) fires, and write() returns false. A socket write that
// does not complete within HttpServerConfig::write_timeout closes the connection with
// CloseReason::timeout. Memory per slow client is therefore bounded by the cap.
//
// Callbacks (on_close, on_drain) run on the connection's io thread, never inside an Exchange call;
// keep them short and non-blocking (flip a flag, ask the engine to abort). Each fires at most once,
// and both are dropped when the response completes or the connection closes, so a callback that
// captures the exchange does not leak it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http/http_message.h"

namespace fp4serve::http {

// Starlette's StreamingResponse(media_type="text/event-stream") appends the charset; vLLM streams
// therefore carry exactly this value.
inline constexpr const char* kEventStreamContentType = "text/event-stream; charset=utf-8";

class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const HttpRequest& request() const = 0;

  // A whole response (Content-Length framing).
  virtual bool respond(HttpResponse response) = 0;

  // Sends the status line and headers with Transfer-Encoding: chunked (HTTP/1.0 clients get an
  // unframed body ended by closing the connection).
  virtual bool start_stream(int status = 200, std::vector<Header> headers = {},
                            std::string content_type = kEventStreamContentType) = 0;
  // One chunk (e.g. one SSE event "data: {...}\n\n"). Empty chunks are ignored (an empty chunk
  // would end the chunked body).
  virtual bool write(std::string chunk) = 0;
  // Optional last chunk, then the terminating zero-length chunk.
  virtual bool finish(std::string last_chunk = {}) = 0;

  // Fired when the connection ends before the handler finished its response: client closed or
  // reset the socket, timeout, back-pressure overflow, forced close at shutdown. Never fired after
  // respond()/finish() was called. If the connection is already gone when the callback is
  // registered, it is still fired, soon, on the io thread -- never inside this call, so the caller
  // may hold a lock the callback takes. A second registration replaces the first.
  virtual void on_close(std::function<void(CloseReason)> callback) = 0;
  // Fired once when the server starts draining while this response is unfinished; the handler
  // should end the response soon (e.g. send a final error event and finish()). Same delivery rules
  // as on_close.
  virtual void on_drain(std::function<void()> callback) = 0;

  // True once the connection has ended before the response completed.
  virtual bool closed() const = 0;
};

// Called on the connection's io thread. It must not block: answer at once, or keep the exchange
// and answer later from any thread. An exception escaping the handler becomes a 500 response.
using Handler = std::function<void(std::shared_ptr<Exchange>)>;

}  // namespace fp4serve::http
