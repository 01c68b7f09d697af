#include "engine/ipc/restart_policy.h"

#include <algorithm>

namespace fp4serve::engine::ipc {

std::optional<std::chrono::milliseconds> RestartBudget::next(Clock::time_point now) {
  if (last_restart_ && now - *last_restart_ >= policy_.healthy_after) in_a_row_ = 0;
  if (in_a_row_ >= policy_.max_restarts) return std::nullopt;
  std::chrono::milliseconds wait{0};
  if (in_a_row_ > 0) {
    wait = policy_.initial_backoff;
    for (int i = 1; i < in_a_row_ && wait < policy_.max_backoff; ++i) wait *= 2;
    wait = std::min(wait, policy_.max_backoff);
  }
  ++in_a_row_;
  last_restart_ = now;
  return wait;
}

}  // namespace fp4serve::engine::ipc
