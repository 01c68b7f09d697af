// RequestOutput (deltas with their tokens, text, logprobs, prompt logprobs, finish and stop reasons)
// as a JSON value for the engine process's socket (msgpack on the wire, frame_io.h).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/request_output.h"

namespace fp4serve::engine::ipc {

nlohmann::json encode_request_output(const RequestOutput& out);
// Throws nlohmann::json::exception on a malformed value.
RequestOutput decode_request_output(const nlohmann::json& j);

}  // namespace fp4serve::engine::ipc
