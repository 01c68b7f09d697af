// EngineInfo (limits, vocabulary sizes, the cache plan with its log lines) as a JSON value: the
// engine process sends it once, when its engine is up, and the front-end serves from it.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace fp4serve::engine::ipc {

nlohmann::json encode_engine_info(const EngineInfo& info);
// Throws nlohmann::json::exception on a malformed value.
EngineInfo decode_engine_info(const nlohmann::json& j);

}  // namespace fp4serve::engine::ipc
