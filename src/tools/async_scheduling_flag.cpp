#include "tools/async_scheduling_flag.h"

#include <CLI/CLI.hpp>

namespace fp4serve::tools {

void add_async_scheduling_flag(CLI::App& cmd, bool& enabled) {
  cmd.add_flag("--async-scheduling,!--no-async-scheduling", enabled,
               "process a step's outputs (detokenize, stop strings, streaming) while the next step runs on the "
               "device (default on, as vLLM; the outputs are the synchronous loop's)");
}

std::string async_scheduling_decision(bool enabled) {
  return enabled ? "Asynchronous scheduling is enabled." : "Asynchronous scheduling is disabled.";
}

}  // namespace fp4serve::tools
