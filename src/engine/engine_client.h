// What the HTTP front-end needs from an engine, whichever process runs it: vLLM V1's EngineClient
// (AsyncLLM over an EngineCore in the same process or in a child). Two implementations:
//  * InProcessEngineClient: the Engine in this process (generate, bench, tests, and `serve` with
//    VLLM_ENABLE_V1_MULTIPROCESSING=0);
//  * ipc::ProcessEngineClient: the Engine in a supervised child process (`serve`'s default), restarted
//    when it dies or wedges, with every in-flight request resumed (ipc/process_engine_client.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include "engine/engine.h"

namespace fp4serve::engine {

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  // Queues a request; its outputs arrive on the returned channel. Throws EngineRejected.
  virtual std::shared_ptr<OutputChannel> submit(EngineRequest request) = 0;
  // Cancels a request: its channel gets a final "abort" output; it is never resumed.
  virtual void abort(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual const EngineInfo& info() const = 0;
  // Stops accepting, lets in-flight requests finish for up to `drain`, then ends the rest.
  virtual void shutdown(std::chrono::milliseconds drain) = 0;

  // False while the engine is being restarted (/health answers 503).
  virtual bool available() const { return true; }
  // Fault injection (--enable-debug-endpoints): freeze the engine loop; zero the GDN state.
  virtual void set_debug_stall(bool stalled) = 0;
  virtual void set_corrupt_gdn_state(bool on) = 0;
  // Makes the engine process crash with SIGSEGV. Returns why it cannot (the engine runs in this
  // process: crashing it would take the server down).
  virtual std::optional<std::string> debug_segfault() { return "the engine runs in the server process"; }
  // The process that runs the engine (tests SIGKILL it).
  virtual long engine_pid() const { return static_cast<long>(::getpid()); }
};

// The Engine in this process, owned.
class InProcessEngineClient final : public EngineClient {
 public:
  explicit InProcessEngineClient(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
  std::shared_ptr<OutputChannel> submit(EngineRequest request) override { return engine_->submit(std::move(request)); }
  void abort(const std::string& request_id) override { engine_->abort(request_id); }
  EngineStats stats() const override { return engine_->stats(); }
  const EngineInfo& info() const override { return engine_->info(); }
  void shutdown(std::chrono::milliseconds drain) override { engine_->shutdown(drain); }
  void set_debug_stall(bool stalled) override { engine_->set_debug_stall(stalled); }
  void set_corrupt_gdn_state(bool on) override { engine_->set_corrupt_gdn_state(on); }
  Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace fp4serve::engine
