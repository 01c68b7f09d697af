// EngineStats (scheduler gauges and counters, finished-request counts, every histogram, the
// watchdog's progress time) as a JSON value for the engine process's socket.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/engine_stats.h"

namespace fp4serve::engine::ipc {

nlohmann::json encode_engine_stats(const EngineStats& s);
// Throws nlohmann::json::exception on a malformed value.
EngineStats decode_engine_stats(const nlohmann::json& j);

}  // namespace fp4serve::engine::ipc
