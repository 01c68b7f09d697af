#include "engine/output_channel.h"

namespace fp4serve::engine {

void OutputChannel::push(RequestOutput output) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    if (output.finished) closed_ = true;
    queue_.push_back(std::move(output));
    notify = notifier_;
  }
  ready_.notify_all();
  if (notify) notify();
}

std::deque<RequestOutput> OutputChannel::drain() {
  std::lock_guard lock(mutex_);
  std::deque<RequestOutput> out;
  out.swap(queue_);
  return out;
}

std::optional<RequestOutput> OutputChannel::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

void OutputChannel::set_notifier(std::function<void()> notifier) {
  std::lock_guard lock(mutex_);
  notifier_ = std::move(notifier);
}

bool OutputChannel::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace fp4serve::engine
