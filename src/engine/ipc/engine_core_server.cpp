#include "engine/ipc/engine_core_server.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "engine/ipc/frame_io.h"
#include "engine/ipc/info_codec.h"
#include "engine/ipc/messages.h"
#include "engine/ipc/output_codec.h"
#include "engine/ipc/request_codec.h"
#include "engine/ipc/stats_codec.h"

namespace fp4serve::engine::ipc {
namespace {

using nlohmann::json;

// One request's channel as the forwarder sees it: set once submit() returned it (outputs may be
// pushed before that, so a slot is marked ready only when both are there).
struct Slot {
  std::string id;
  std::shared_ptr<OutputChannel> channel;
};

// Sends every request's outputs to the front-end, off the engine thread: the engine's notifier only
// marks the slot, this thread drains it and writes (a slow socket never blocks the engine).
class Forwarder {
 public:
  Forwarder(int fd, std::mutex& write_mutex) : fd_(fd), write_mutex_(write_mutex), thread_([this] { run(); }) {}
  ~Forwarder() { stop(); }

  void mark(const std::shared_ptr<Slot>& slot) {
    {
      std::lock_guard lock(mutex_);
      dirty_.push_back(slot);
    }
    cv_.notify_one();
  }
  void set_channel(const std::shared_ptr<Slot>& slot, std::shared_ptr<OutputChannel> channel) {
    {
      std::lock_guard lock(mutex_);
      slot->channel = std::move(channel);
    }
    mark(slot);
  }
  // Forwards what is queued, then ends the thread.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || ready_count() > 0; });
      if (ready_count() == 0 && stopping_) return;
      std::deque<std::shared_ptr<Slot>> batch;
      std::deque<std::shared_ptr<Slot>> later;
      for (auto& s : dirty_) (s->channel ? batch : later).push_back(std::move(s));
      dirty_ = std::move(later);
      lock.unlock();
      for (const auto& s : batch) {
        for (RequestOutput& out : s->channel->drain()) {
          const json m{{"t", msg::kOutput}, {"out", encode_request_output(out)}};
          std::lock_guard wl(write_mutex_);
          write_message(fd_, m);
        }
      }
      lock.lock();
    }
  }
  std::size_t ready_count() const {
    std::size_t n = 0;
    for (const auto& s : dirty_) n += s->channel != nullptr;
    return n;
  }

  int fd_;
  std::mutex& write_mutex_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Slot>> dirty_;
  bool stopping_ = false;
  std::thread thread_;
};

json ack(const std::string& id, bool ok, EngineRejected::Reason reason, const std::string& what) {
  return json{{"t", msg::kAck}, {"id", id}, {"ok", ok}, {"reason", static_cast<int>(reason)}, {"what", what}};
}

}  // namespace

void run_engine_core(Engine& engine, int fd, const EngineCoreOptions& options) {
  std::mutex write_mutex;
  auto send = [&](const json& m) {
    std::lock_guard lock(write_mutex);
    return write_message(fd, m);
  };
  send(json{{"t", msg::kReady}, {"info", encode_engine_info(engine.info())}, {"pid", static_cast<long>(::getpid())}});
  Forwarder forwarder(fd, write_mutex);
  std::chrono::milliseconds drain{0};
  bool asked_to_stop = false;
  while (auto m = read_message(fd)) {
    const std::string t = m->value("t", "");
    if (t == msg::kSubmit) {
      std::string id;
      try {
        EngineRequest r = decode_engine_request(m->at("req"));
        id = r.id;
        auto slot = std::make_shared<Slot>();
        slot->id = r.id;
        r.notifier = [&forwarder, slot] { forwarder.mark(slot); };
        auto channel = engine.submit(std::move(r));
        forwarder.set_channel(slot, std::move(channel));
        send(ack(id, true, EngineRejected::Reason::kInvalid, ""));
      } catch (const EngineRejected& e) {
        send(ack(id, false, e.reason(), e.what()));
      } catch (const std::exception& e) {
        send(ack(id, false, EngineRejected::Reason::kInvalid, std::string("malformed request: ") + e.what()));
      }
    } else if (t == msg::kAbort) {
      engine.abort(m->value("id", ""));
    } else if (t == msg::kStats) {
      send(json{{"t", msg::kStats}, {"q", m->value("q", 0)}, {"stats", encode_engine_stats(engine.stats())}});
    } else if (t == msg::kStall && options.debug_switches) {
      engine.set_debug_stall(m->value("on", false));
    } else if (t == msg::kCorruptGdn && options.debug_switches) {
      engine.set_corrupt_gdn_state(m->value("on", false));
    } else if (t == msg::kSegfault && options.debug_switches) {
      spdlog::warn("debug switch: the engine process crashes itself with SIGSEGV");
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    } else if (t == msg::kShutdown) {
      drain = std::chrono::milliseconds(m->value("drain_ms", 0));
      asked_to_stop = true;
      break;
    }
  }
  // Shutdown (or the front-end is gone): what is still running ends with its final output.
  engine.shutdown(drain);
  forwarder.stop();
  if (asked_to_stop) send(json{{"t", msg::kBye}});
}

}  // namespace fp4serve::engine::ipc
