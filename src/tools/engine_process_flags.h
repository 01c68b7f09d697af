// `serve`'s engine process (vLLM V1's EngineCore in its own process): on by default, off with
// VLLM_ENABLE_V1_MULTIPROCESSING=0 (the engine then runs in the server process, as before). The
// child is the same command line plus the hidden --engine-core-fd, so every serve flag reaches it.
#pragma once

#include <string>
#include <vector>

#include "engine/ipc/process_engine_client.h"

namespace CLI {
class App;
}

namespace fp4serve::tools {

struct EngineProcessFlags {
  int max_engine_restarts = 5;     // restarts in a row (a minute without one starts the count again)
  double engine_restart_wait = 30;  // seconds a new request waits for a restarting engine, then 503
  int engine_core_fd = -1;         // hidden: set in the engine process (its socket to the front-end)
};

void add_engine_process_flags(CLI::App& cmd, EngineProcessFlags& flags);

// VLLM_ENABLE_V1_MULTIPROCESSING unset or not "0".
bool engine_multiprocessing_enabled();

// The front-end's options for its engine process: this program's command line with
// "--engine-core-fd {fd}" after the `serve` subcommand.
engine::ipc::ProcessEngineOptions engine_process_options(const EngineProcessFlags& flags, double health_stall_timeout);

// main() records the command line here (the engine process gets it again).
void set_command_line(int argc, char** argv);

}  // namespace fp4serve::tools
