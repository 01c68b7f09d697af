#include "tools/engine_process_flags.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace fp4serve::tools {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

}  // namespace

void set_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

void add_engine_process_flags(CLI::App& cmd, EngineProcessFlags& f) {
  cmd.add_option("--max-engine-restarts", f.max_engine_restarts,
                 "restarts of a dead or wedged engine process in a row (back-off 0.25 s doubling to 8 s; a minute "
                 "without one starts the count again); 0: never restart")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--engine-restart-wait", f.engine_restart_wait,
                 "seconds a new request waits for a restarting engine process before 503")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--engine-core-fd", f.engine_core_fd, "(internal: the engine process's socket)")->group("");
}

bool engine_multiprocessing_enabled() {
  const char* v = std::getenv("VLLM_ENABLE_V1_MULTIPROCESSING");
  return v == nullptr || std::string(v) != "0";
}

engine::ipc::ProcessEngineOptions engine_process_options(const EngineProcessFlags& f, double health_stall_timeout) {
  engine::ipc::ProcessEngineOptions o;
  std::vector<std::string> args = command_line();
  const auto serve = std::find(args.begin(), args.end(), "serve");
  if (serve == args.end()) throw std::runtime_error("the engine process needs the `serve` command line");
  args.insert(serve + 1, {"--engine-core-fd", "{fd}"});
  o.argv = std::move(args);
  o.stall_timeout = std::chrono::milliseconds(static_cast<long long>(health_stall_timeout * 1000));
  o.restart.max_restarts = f.max_engine_restarts;
  o.submit_wait = std::chrono::milliseconds(static_cast<long long>(f.engine_restart_wait * 1000));
  return o;
}

}  // namespace fp4serve::tools
