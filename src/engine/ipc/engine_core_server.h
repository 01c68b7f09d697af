// The engine process's side of the socket (vLLM's EngineCoreProc): announces the engine (ready),
// takes submits, aborts, stats queries and debug switches from the front-end, and forwards every
// request's outputs as they come. Returns when the front-end asks for shutdown or goes away (EOF).
#pragma once

#include "engine/engine.h"

namespace fp4serve::engine::ipc {

struct EngineCoreOptions {
  bool debug_switches = false;  // --enable-debug-endpoints: stall, corrupt-gdn and segfault obeyed
};

void run_engine_core(Engine& engine, int fd, const EngineCoreOptions& options);

}  // namespace fp4serve::engine::ipc
