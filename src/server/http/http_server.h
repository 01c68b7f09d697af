// The HTTP/1.1 server: a listener (TCP or a Unix socket, plain or TLS: listener.h) and a fixed pool
// of io threads over one asio io_context; each connection runs on its own strand, so the thread
// count stays fixed whatever the number of connections. Requests are routed by exact (method, path)
// through a Router after the API-key check and CORS (cors_policy.h), under --root-path
// (request_target.h route_path).
//
// Shutdown, in the order the lead calls it:
//   stop_accepting();        // new connections are refused (listening socket closed)
//   begin_drain();           // idle connections close; on_drain fires for unfinished responses;
//                            // responses completed from now on carry "Connection: close";
//                            // requests arriving now get 503
//   wait_idle(deadline);     // until no response is in flight, or the deadline
//   stop();                  // closes what is left (on_close(server_shutdown)), joins the threads
// or shutdown(grace) for all four. The destructor calls stop().
//
// stop() and shutdown() join the io threads, so call them from main (not from a handler or callback).
//
// Use (the lead's wiring, sketched):
//   Router router;
//   router.get("/health", [&](std::shared_ptr<Exchange> ex) { ex->respond({200, "", {}, ""}); });
//   router.post("/v1/completions", [&](std::shared_ptr<Exchange> ex) {
//     auto id = engine.submit(parse(ex->request().body), /*on_output=*/[ex](Output o) {
//       ex->write("data: " + to_json(o) + "\n\n");          // engine thread; never blocks
//       if (o.finished) ex->finish("data: [DONE]\n\n");
//     });
//     ex->start_stream();
//     ex->on_close([&engine, id](CloseReason) { engine.abort(id); });
//     ex->on_drain([ex] { ex->write(error_event("shutting down")); ex->finish("data: [DONE]\n\n"); });
//   });
//   HttpServerConfig cfg; cfg.port = 8000; cfg.access_log = [](const AccessLogEntry& e) {
//     spdlog::info("{}", uvicorn_style_access_line(e)); };
//   HttpServer server(cfg, std::move(router));
//   TerminationSignals signals;  // termination_signals.h
//   server.start();
//   signals.wait();
//   server.shutdown(std::chrono::seconds(30));
//
// Beast/Asio stay inside the .cpp files; this header is cheap to include.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "server/http/exchange.h"
#include "server/http/http_server_config.h"
#include "server/http/router.h"

namespace fp4serve::http {

class HttpServer {
 public:
  // The router is copied at construction; routes cannot change while serving. With TLS configured
  // the certificate and key are loaded here: throws TlsConfigError (tls_settings.h) naming the file.
  HttpServer(HttpServerConfig config, Router router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the io threads. Throws std::runtime_error (naming host:port or the
  // --uds path) when the address cannot be resolved or bound.
  void start();
  unsigned short port() const;     // the bound TCP port (valid after start; 0 on a Unix socket)
  // vLLM's listen address: "http://host:port", "https://host:port" or "unix:PATH" (after start).
  const std::string& listen_address() const;
  unsigned io_thread_count() const;

  void stop_accepting();
  void begin_drain();
  // Returns true when no response is in flight (before the deadline).
  bool wait_idle(std::chrono::steady_clock::time_point deadline);
  void stop();
  // stop_accepting + begin_drain + wait_idle(now + grace) + stop. Returns wait_idle's answer.
  bool shutdown(std::chrono::milliseconds grace);

  // Requests whose response has not completed (waiting for the engine or streaming).
  std::size_t in_flight() const;
  std::size_t open_connections() const;
  // Calls fn for every exchange in flight (on the caller's thread; fn must not block for long).
  void for_each_in_flight(const std::function<void(const std::shared_ptr<Exchange>&)>& fn) const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace fp4serve::http
