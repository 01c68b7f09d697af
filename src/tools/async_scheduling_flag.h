// vLLM's --async-scheduling / --no-async-scheduling (SchedulerConfig.async_scheduling). vLLM leaves
// it unset by default and resolves it to on unless the configuration has something it cannot overlap
// (pipeline parallelism, a speculative method other than EAGLE/MTP, an executor backend without it:
// none of which fp4serve has), then logs "Asynchronous scheduling is enabled." (vllm/config/vllm.py).
// The engine's side: EngineConfig::async_scheduling (engine/engine.h).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace fp4serve::tools {

// Registers the pair on a subcommand; `enabled` starts true (vLLM's resolved default), the last of
// the two flags given wins (argparse's BooleanOptionalAction).
void add_async_scheduling_flag(CLI::App& cmd, bool& enabled);

// vLLM's start-up line for the choice.
std::string async_scheduling_decision(bool enabled);

}  // namespace fp4serve::tools
