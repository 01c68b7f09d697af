#include "engine/ipc/process_engine_client.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/ipc/child_process.h"
#include "engine/ipc/frame_io.h"
#include "engine/ipc/info_codec.h"
#include "engine/ipc/messages.h"
#include "engine/ipc/output_codec.h"
#include "engine/ipc/request_codec.h"
#include "engine/ipc/stats_codec.h"

namespace fp4serve::engine::ipc {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

struct ProcessEngineClient::Child {
  pid_t pid = -1;
  int fd = -1;
  std::mutex write_mutex;
  std::thread reader;
  bool ready = false;  // under the client's mutex
  bool eof = false;    // under the client's mutex: the socket closed (the child died or exited)
  bool reaped = false;
  EngineInfo info;
  ~Child() {
    if (reader.joinable()) reader.join();
    if (fd >= 0) ::close(fd);
  }
};

ProcessEngineClient::ProcessEngineClient(ProcessEngineOptions options)
    : options_(std::move(options)), budget_(options_.restart) {
  std::shared_ptr<Child> child = spawn();
  info_ = child->info;
  {
    std::lock_guard lock(mutex_);
    child_ = child;
    up_ = true;
  }
  supervisor_ = std::thread([this] { supervise(); });
}

ProcessEngineClient::~ProcessEngineClient() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<ProcessEngineClient::Child> ProcessEngineClient::spawn() {
  std::vector<std::string> argv = options_.argv;
  for (std::string& a : argv)
    if (a == "{fd}") a = std::to_string(kChildSocketFd);
  const SpawnedChild sc = spawn_self(argv);
  auto child = std::make_shared<Child>();
  child->pid = sc.pid;
  child->fd = sc.fd;
  child->reader = std::thread([this, c = child.get()] { read_loop(c); });
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return child->ready || child->eof; });
  if (!child->ready) {
    lock.unlock();
    int status = 0;
    ::waitpid(child->pid, &status, 0);
    child->reaped = true;
    throw std::runtime_error(fmt::format("the engine process (pid {}) {} before its engine was up", child->pid,
                                         describe_wait_status(status)));
  }
  spdlog::info("Engine process pid {} is up", child->pid);
  return child;
}

void ProcessEngineClient::read_loop(Child* child) {
  while (auto m = read_message(child->fd)) {
    const std::string t = m->value("t", "");
    try {
      if (t == msg::kOutput) {
        on_output(*m);
      } else if (t == msg::kAck) {
        on_ack(*m);
      } else if (t == msg::kStats) {
        EngineStats s = decode_engine_stats(m->at("stats"));
        std::lock_guard lock(mutex_);
        if (auto it = stats_replies_.find(m->value("q", std::int64_t{0})); it != stats_replies_.end())
          it->second = std::move(s);
        cv_.notify_all();
      } else if (t == msg::kReady) {
        EngineInfo info = decode_engine_info(m->at("info"));
        std::lock_guard lock(mutex_);
        child->info = std::move(info);
        child->ready = true;
        cv_.notify_all();
      }
    } catch (const std::exception& e) {
      spdlog::error("engine process pid {}: malformed '{}' message: {}", child->pid, t, e.what());
    }
  }
  std::lock_guard lock(mutex_);
  child->eof = true;
  if (child_.get() == child) up_ = false;
  cv_.notify_all();
}

void ProcessEngineClient::on_output(const json& m) {
  RequestOutput out = decode_request_output(m.at("out"));
  std::shared_ptr<OutputChannel> channel;
  {
    std::lock_guard lock(mutex_);
    channel = table_.record(out);
    if (resume_started_ && channel) {
      spdlog::info("Streams resumed: first output {:.0f} ms after the engine process died",
                   ms_since(*resume_started_));
      resume_started_.reset();
    }
  }
  if (channel) channel->push(std::move(out));
}

void ProcessEngineClient::on_ack(const json& m) {
  const std::string id = m.value("id", "");
  std::shared_ptr<OutputChannel> channel;
  RequestOutput final_out;
  {
    std::lock_guard lock(mutex_);
    InflightRequest* e = table_.find(id);
    if (e == nullptr) return;
    if (m.value("ok", false)) {
      e->ack = InflightRequest::Ack::kAccepted;
    } else if (e->ack == InflightRequest::Ack::kAccepted) {
      // A resumed request the new engine refuses: its stream ends with the reason.
      final_out = final_output(*e, "abort", "the restarted engine refused the request: " + m.value("what", ""), false);
      channel = e->channel;
      table_.remove(id);
    } else {
      e->ack = InflightRequest::Ack::kRejected;
      e->reject_reason = static_cast<EngineRejected::Reason>(m.value("reason", 2));
      e->reject_message = m.value("what", "");
    }
    cv_.notify_all();
  }
  if (channel) channel->push(std::move(final_out));
}

bool ProcessEngineClient::send(const json& m) const {
  std::shared_ptr<Child> child;
  {
    std::lock_guard lock(mutex_);
    child = child_;
  }
  if (!child) return false;
  std::lock_guard lock(child->write_mutex);
  return write_message(child->fd, m);
}

std::shared_ptr<OutputChannel> ProcessEngineClient::submit(EngineRequest request) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, options_.submit_wait, [&] { return up_ || gone_ || shutting_down_; }))
    throw EngineRejected(EngineRejected::Reason::kOverloaded,
                         fmt::format("the engine is restarting (waited {:.0f} s)",
                                     std::chrono::duration<double>(options_.submit_wait).count()));
  if (shutting_down_) throw EngineRejected(EngineRejected::Reason::kShuttingDown, "the server is shutting down");
  if (gone_)
    throw EngineRejected(EngineRejected::Reason::kOverloaded,
                         "the engine process keeps dying: its restart budget (--max-engine-restarts) is spent");
  if (table_.find(request.id))
    throw EngineRejected(EngineRejected::Reason::kInvalid, fmt::format("duplicate request id {}", request.id));
  lock.unlock();
  const std::string id = request.id;
  auto channel = std::make_shared<OutputChannel>();
  if (request.notifier) channel->set_notifier(std::move(request.notifier));
  const json m{{"t", msg::kSubmit}, {"req", encode_engine_request(request)}};
  {
    // With the resubmission after a restart: a request is sent to one engine once.
    std::lock_guard submit_lock(submit_mutex_);
    {
      std::lock_guard l(mutex_);
      table_.add(std::move(request), channel);
    }
    send(m);
  }
  // The engine's answer; past the deadline (an engine that died and has not come back) the request
  // is dropped as refused.
  lock.lock();
  const auto deadline = Clock::now() + options_.submit_wait + std::chrono::seconds(5);
  const bool answered = cv_.wait_until(lock, deadline, [&] {
    const InflightRequest* e = table_.find(id);
    return e == nullptr || e->ack != InflightRequest::Ack::kPending;
  });
  InflightRequest* e = table_.find(id);
  if (e == nullptr || e->ack == InflightRequest::Ack::kAccepted) return channel;
  const EngineRejected::Reason reason = answered ? e->reject_reason : EngineRejected::Reason::kOverloaded;
  const std::string what = answered ? e->reject_message : "the engine did not answer";
  table_.remove(id);
  lock.unlock();
  if (!answered) send(json{{"t", msg::kAbort}, {"id", id}});
  throw EngineRejected(reason, what);
}

void ProcessEngineClient::abort(const std::string& request_id) {
  {
    std::lock_guard lock(mutex_);
    InflightRequest* e = table_.find(request_id);
    if (e == nullptr) return;
    e->cancelled = true;
  }
  send(json{{"t", msg::kAbort}, {"id", request_id}});
}

std::optional<EngineStats> ProcessEngineClient::query_stats(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  if (!up_) return std::nullopt;
  const std::int64_t q = ++next_query_;
  stats_replies_[q] = std::nullopt;
  const std::shared_ptr<Child> child = child_;
  lock.unlock();
  send(json{{"t", msg::kStats}, {"q", q}});
  lock.lock();
  cv_.wait_for(lock, timeout, [&] { return stats_replies_[q].has_value() || child_ != child || !up_; });
  std::optional<EngineStats> s = std::move(stats_replies_[q]);
  stats_replies_.erase(q);
  if (s) last_stats_ = *s;
  return s;
}

EngineStats ProcessEngineClient::stats() const {
  std::optional<EngineStats> s = query_stats(std::chrono::milliseconds(2000));
  EngineStats out;
  if (s) {
    out = std::move(*s);
  } else {
    std::lock_guard lock(mutex_);
    out = last_stats_;
  }
  out.engine_restarts = restarts_.load();
  return out;
}

bool ProcessEngineClient::available() const {
  std::lock_guard lock(mutex_);
  return up_;
}

void ProcessEngineClient::set_debug_stall(bool stalled) { send(json{{"t", msg::kStall}, {"on", stalled}}); }
void ProcessEngineClient::set_corrupt_gdn_state(bool on) { send(json{{"t", msg::kCorruptGdn}, {"on", on}}); }

std::optional<std::string> ProcessEngineClient::debug_segfault() {
  if (!send(json{{"t", msg::kSegfault}})) return "no engine process is running";
  return std::nullopt;
}

long ProcessEngineClient::engine_pid() const {
  std::lock_guard lock(mutex_);
  return child_ ? static_cast<long>(child_->pid) : -1;
}

void ProcessEngineClient::supervise() {
  supervise_until_shutdown();
  // A child dies with the thread that forked it (PR_SET_PDEATHSIG is per thread): this thread,
  // which starts the restarted ones, waits until shutdown() has stopped the last child.
  std::unique_lock lock(mutex_);
  supervisor_parked_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return supervisor_released_; });
}

void ProcessEngineClient::supervise_until_shutdown() {
  auto last_answer = Clock::now();
  while (true) {
    std::shared_ptr<Child> child;
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, options_.watchdog_interval, [&] { return shutting_down_ || child_->eof; });
      if (shutting_down_) return;
      child = child_;
      if (child->eof) {
        lock.unlock();
        if (!restart()) return;
        last_answer = Clock::now();
        continue;
      }
    }
    // The watchdog: work pending and no token for the stall timeout (or no answer at all) is a
    // wedge; the engine is killed and restarted like a dead one.
    const auto s = query_stats(std::min<std::chrono::milliseconds>(options_.stall_timeout, std::chrono::seconds(1)));
    const auto now = Clock::now();
    std::string wedge;
    if (s) {
      last_answer = now;
      if (s->has_work && now - s->last_progress > options_.stall_timeout)
        wedge = fmt::format("wedged: {} running and {} waiting requests, no token for {:.1f} s", s->scheduler.num_running,
                            s->scheduler.num_waiting, std::chrono::duration<double>(now - s->last_progress).count());
    } else if (now - last_answer > options_.stall_timeout) {
      wedge = fmt::format("unresponsive for {:.1f} s", std::chrono::duration<double>(now - last_answer).count());
    }
    if (!wedge.empty()) {
      std::lock_guard lock(mutex_);
      if (child_ == child && !child->eof && !shutting_down_) {
        spdlog::error("Engine process pid {} {} (--health-stall-timeout {:.1f} s): killing it (SIGKILL)", child->pid,
                      wedge, std::chrono::duration<double>(options_.stall_timeout).count());
        ::kill(child->pid, SIGKILL);
      }
    }
  }
}

bool ProcessEngineClient::restart() {
  const auto died = Clock::now();
  std::shared_ptr<Child> dead;
  std::size_t in_flight = 0;
  {
    std::lock_guard lock(mutex_);
    dead = child_;
    in_flight = table_.size();
  }
  int status = 0;
  if (!dead->reaped) {
    ::waitpid(dead->pid, &status, 0);
    dead->reaped = true;
    spdlog::error("Engine process pid {} {}; {} requests in flight", dead->pid, describe_wait_status(status), in_flight);
  }
  std::optional<std::chrono::milliseconds> wait;
  {
    std::unique_lock lock(mutex_);
    if (shutting_down_) return false;
    wait = budget_.next(died);
    if (!wait) {
      spdlog::error("Engine process restart budget spent ({} restarts in a row, --max-engine-restarts): the "
                    "in-flight requests fail and new ones get 503",
                    options_.restart.max_restarts);
      gone_ = true;
      cv_.notify_all();
    } else if (wait->count() > 0) {
      spdlog::warn("Restarting the engine process in {} ms (restart {} of at most {} in a row)", wait->count(),
                   budget_.restarts_in_a_row(), options_.restart.max_restarts);
      cv_.wait_for(lock, *wait, [&] { return shutting_down_; });
      if (shutting_down_) return false;
    } else {
      spdlog::warn("Restarting the engine process (restart {} of at most {} in a row)", budget_.restarts_in_a_row(),
                   options_.restart.max_restarts);
    }
  }
  if (!wait) {
    fail_all("the engine process died and was not restarted (--max-engine-restarts)", false);
    return false;
  }
  std::shared_ptr<Child> child;
  try {
    child = spawn();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    std::lock_guard lock(mutex_);
    auto failed = std::make_shared<Child>();
    failed->eof = true;
    failed->reaped = true;
    child_ = failed;  // the next round of supervise() restarts again, within the budget
    return true;
  }
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> cancelled;
  std::size_t resumed = 0;
  {
    std::lock_guard submit_lock(submit_mutex_);
    std::vector<EngineRequest> requests;
    {
      std::lock_guard lock(mutex_);
      child_ = child;
      cancelled = table_.take_cancelled();
      requests = table_.resumable();
      if (!requests.empty()) resume_started_ = died;
    }
    for (const EngineRequest& r : requests) send(json{{"t", msg::kSubmit}, {"req", encode_engine_request(r)}});
    resumed = requests.size();
    std::lock_guard lock(mutex_);
    up_ = !child->eof;
    ++restarts_;
    cv_.notify_all();
  }
  for (auto& [channel, out] : cancelled) channel->push(std::move(out));
  spdlog::warn("Engine process restarted as pid {} {:.0f} ms after the last one died: {} in-flight requests resumed, "
               "{} cancelled ones dropped",
               child->pid, ms_since(died), resumed, cancelled.size());
  return true;
}

void ProcessEngineClient::fail_all(const std::string& error, bool is_shutdown) {
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> outs;
  {
    std::lock_guard lock(mutex_);
    outs = table_.take_all(error, is_shutdown);
    cv_.notify_all();
  }
  for (auto& [channel, out] : outs) channel->push(std::move(out));
}

void ProcessEngineClient::shutdown(std::chrono::milliseconds drain) {
  std::shared_ptr<Child> child;
  {
    std::unique_lock lock(mutex_);
    if (shutting_down_) return;
    shutting_down_ = true;
    cv_.notify_all();
    // Past any restart in progress: child_ is the last engine process.
    if (supervisor_.joinable()) cv_.wait(lock, [&] { return supervisor_parked_; });
    child = child_;
  }
  if (child && !child->reaped) {
    send(json{{"t", msg::kShutdown}, {"drain_ms", drain.count()}});
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, drain + std::chrono::seconds(10), [&] { return child->eof; })) {
      spdlog::error("Engine process pid {} did not stop: killing it", child->pid);
      ::kill(child->pid, SIGKILL);
      cv_.wait(lock, [&] { return child->eof; });
    }
    lock.unlock();
    int status = 0;
    ::waitpid(child->pid, &status, 0);
    child->reaped = true;
    spdlog::info("Engine process pid {} {}", child->pid, describe_wait_status(status));
  }
  fail_all("server shutting down", true);
  {
    std::lock_guard lock(mutex_);
    up_ = false;
    supervisor_released_ = true;
    cv_.notify_all();
  }
  if (supervisor_.joinable()) supervisor_.join();
}

}  // namespace fp4serve::engine::ipc
