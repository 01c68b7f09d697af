// How often a dead or wedged engine process is restarted: at most `max_restarts` restarts in a row
// (a run of `healthy_after` without a restart starts the count again), the first at once and each
// further one after a doubling back-off (initial_backoff, 2x, 4x, ... capped at max_backoff).
#pragma once

#include <chrono>
#include <optional>

namespace fp4serve::engine::ipc {

struct RestartPolicy {
  int max_restarts = 5;  // --max-engine-restarts; 0: never restart (the server fails the requests)
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  std::chrono::milliseconds healthy_after{60000};
};

class RestartBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RestartBudget(RestartPolicy policy) : policy_(policy) {}

  // The wait before the next restart for an engine that died at `now`, or nullopt when the budget is
  // spent. Counts the restart.
  std::optional<std::chrono::milliseconds> next(Clock::time_point now);
  int restarts_in_a_row() const { return in_a_row_; }

 private:
  RestartPolicy policy_;
  int in_a_row_ = 0;
  std::optional<Clock::time_point> last_restart_;
};

}  // namespace fp4serve::engine::ipc
