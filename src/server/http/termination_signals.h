// SIGINT/SIGTERM for the serve loop, through asio::signal_set on a private io_context (so signals
// are delivered as ordinary callbacks, never inside a signal handler).
//
//   TerminationSignals signals;          // installs the handlers (construct before serving)
//   server.start();
//   int sig = signals.wait();            // blocks main; returns SIGINT/SIGTERM, or 0 after cancel()
//   server.shutdown(grace);
//
// cancel() (any thread) ends wait() without a signal, e.g. when the engine dies.
#pragma once

#include <memory>

namespace fp4serve::http {

class TerminationSignals {
 public:
  TerminationSignals();
  ~TerminationSignals();
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;

  int wait();
  void cancel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4serve::http
