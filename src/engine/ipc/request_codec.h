// EngineRequest (with its SamplingParams, structured-output parameters, images and resume state) as
// a JSON value for the engine process's socket (msgpack on the wire, frame_io.h). The notifier is a
// front-end callback and does not travel.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace fp4serve::engine::ipc {

nlohmann::json encode_sampling_params(const SamplingParams& p);
SamplingParams decode_sampling_params(const nlohmann::json& j);

nlohmann::json encode_engine_request(const EngineRequest& r);
// Throws nlohmann::json::exception on a malformed value.
EngineRequest decode_engine_request(const nlohmann::json& j);

}  // namespace fp4serve::engine::ipc
