// The per-request queue between the engine thread (producer) and whoever consumes the request's
// output (a server connection, `generate`, a test). Thread-safe; the engine never blocks on it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/request_output.h"

namespace fp4serve::engine {

class OutputChannel {
 public:
  // Engine side. Appends an output and calls the notifier (if any) outside the lock.
  void push(RequestOutput output);

  // Consumer side. Everything queued so far, oldest first (empty if nothing).
  std::deque<RequestOutput> drain();
  // Blocks until an output is available or the timeout passes; nullopt on timeout.
  std::optional<RequestOutput> pop(std::chrono::milliseconds timeout);
  // Called on the engine thread after every push (an asio server posts a wake-up to its strand).
  // Set it before submitting, or call drain() once after setting it.
  void set_notifier(std::function<void()> notifier);
  // True once the final output (finished == true) has been pushed.
  bool closed() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> queue_;
  std::function<void()> notifier_;
  bool closed_ = false;
};

}  // namespace fp4serve::engine
