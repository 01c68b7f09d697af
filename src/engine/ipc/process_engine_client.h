// The front-end's handle on an engine running in a supervised child process (vLLM V1's
// AsyncLLM + EngineCoreClient over a socket instead of ZMQ): `serve`'s default.
//
// The child is this program again (/proc/self/exe) with the same command line plus the socket's
// descriptor; it loads the model, runs the Engine and speaks engine_core_server.h. The front-end keeps
// every in-flight request with what it has sent of it (inflight_table.h). When the child dies (EOF
// on the socket: segfault, abort, OOM kill, SIGKILL) or wedges (work pending and no token for
// stall_timeout; then it is SIGKILLed), the supervisor restarts it within the restart budget
// (restart_policy.h) and resubmits every in-flight request with the tokens already sent, so each
// stream continues with no error and no repeated text. Meanwhile available() is false (/health 503)
// and submit() waits up to submit_wait for the new engine. A request the engine refused is never
// replayed; one the client cancelled is never resumed. Past the budget, in-flight requests end with
// an error and new ones are refused.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_client.h"
#include "engine/ipc/inflight_table.h"
#include "engine/ipc/restart_policy.h"

namespace fp4serve::engine::ipc {

struct ProcessEngineOptions {
  // The child's command line (argv[0] is ignored: the child is /proc/self/exe); "{fd}" in an
  // argument is replaced by the socket's descriptor number.
  std::vector<std::string> argv;
  std::chrono::milliseconds stall_timeout{60000};  // --health-stall-timeout
  RestartPolicy restart;
  std::chrono::milliseconds submit_wait{30000};    // a new request waits this long for a restart
  std::chrono::milliseconds watchdog_interval{200};
};

class ProcessEngineClient final : public EngineClient {
 public:
  // Starts the child and waits until its engine is up. Throws when the child exits first.
  explicit ProcessEngineClient(ProcessEngineOptions options);
  ~ProcessEngineClient() override;

  std::shared_ptr<OutputChannel> submit(EngineRequest request) override;
  void abort(const std::string& request_id) override;
  EngineStats stats() const override;
  const EngineInfo& info() const override { return info_; }
  void shutdown(std::chrono::milliseconds drain) override;
  bool available() const override;
  void set_debug_stall(bool stalled) override;
  void set_corrupt_gdn_state(bool on) override;
  std::optional<std::string> debug_segfault() override;
  long engine_pid() const override;
  std::int64_t restarts() const { return restarts_.load(); }

 private:
  struct Child;
  std::shared_ptr<Child> spawn();  // starts a child and waits for its ready message
  void read_loop(Child* child);  // the child's reader thread (the Child owns it)
  void on_output(const nlohmann::json& m);
  void on_ack(const nlohmann::json& m);
  void supervise();                 // the supervisor thread: restarts, then parks until shutdown
  void supervise_until_shutdown();  // the watchdog and restart loop
  bool restart();  // false: no more engine (budget spent or shutting down)
  bool send(const nlohmann::json& m) const;
  std::optional<EngineStats> query_stats(std::chrono::milliseconds timeout) const;
  void fail_all(const std::string& error, bool is_shutdown);

  ProcessEngineOptions options_;
  EngineInfo info_;
  RestartBudget budget_;
  std::mutex submit_mutex_;   // a submit's send against a restart's resubmission
  mutable std::mutex mutex_;  // child_, table_, state below
  mutable std::condition_variable cv_;
  std::shared_ptr<Child> child_;
  bool up_ = false;          // a child is running and has taken the in-flight requests
  bool gone_ = false;        // restart budget spent: no engine any more
  bool shutting_down_ = false;
  bool supervisor_parked_ = false;    // the supervisor has stopped restarting
  bool supervisor_released_ = false;  // shutdown() has stopped the last child: the supervisor may end
  InflightTable table_;
  mutable std::int64_t next_query_ = 0;
  mutable std::map<std::int64_t, std::optional<EngineStats>> stats_replies_;
  mutable EngineStats last_stats_;
  std::atomic<std::int64_t> restarts_{0};
  std::optional<std::chrono::steady_clock::time_point> resume_started_;  // death of the engine last restarted
  std::thread supervisor_;
};

}  // namespace fp4serve::engine::ipc
