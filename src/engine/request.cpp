#include "engine/request.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

const char* to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinishedStopped: return "finished_stopped";
    case RequestStatus::kFinishedLength: return "finished_length";
    case RequestStatus::kFinishedAborted: return "finished_aborted";
  }
  return "unknown";
}

bool is_finished(RequestStatus status) {
  return status == RequestStatus::kFinishedStopped || status == RequestStatus::kFinishedLength ||
         status == RequestStatus::kFinishedAborted;
}

const char* finish_reason(RequestStatus status) {
  switch (status) {
    case RequestStatus::kFinishedStopped: return "stop";
    case RequestStatus::kFinishedLength: return "length";
    case RequestStatus::kFinishedAborted: return "abort";
    default: return nullptr;
  }
}

bool is_valid_transition(RequestStatus from, RequestStatus to) {
  using S = RequestStatus;
  switch (from) {
    case S::kWaiting:
    case S::kPreempted:
      // Waiting requests are admitted or cancelled; they never finish otherwise.
      return to == S::kRunning || to == S::kFinishedAborted;
    case S::kRunning:
      return to == S::kPreempted || is_finished(to);
    default:
      return false;  // finished is terminal
  }
}

Request::Request(std::string id, std::vector<std::int32_t> prompt_token_ids, int max_tokens,
                 std::uint64_t arrival_seq)
    : id_(std::move(id)),
      all_token_ids_(std::move(prompt_token_ids)),
      num_prompt_tokens_(static_cast<int>(all_token_ids_.size())),
      max_tokens_(max_tokens),
      arrival_seq_(arrival_seq) {
  if (all_token_ids_.empty())
    throw EngineLogicError(fmt::format("request '{}': empty prompt", id_));
  if (max_tokens_ < 1)
    throw EngineLogicError(fmt::format("request '{}': max_tokens {} < 1", id_, max_tokens_));
}

void Request::reserve_tokens(int max_total_tokens) {
  if (max_total_tokens > num_tokens()) all_token_ids_.reserve(static_cast<std::size_t>(max_total_tokens));
}

void Request::transition_to(RequestStatus next) {
  if (!is_valid_transition(status_, next))
    throw EngineLogicError(fmt::format("request '{}': invalid status transition {} -> {}", id_,
                                       to_string(status_), to_string(next)));
  status_ = next;
}

}  // namespace fp4serve::engine
