// Length-prefixed frames on a stream socket between the front-end and the engine process: a 4-byte
// little-endian length, then that many bytes of msgpack (nlohmann::json::to_msgpack). Writes are
// whole frames (callers serialise writers); a read returns nullopt at EOF or on a broken stream.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::engine::ipc {

inline constexpr std::uint32_t kMaxFrameBytes = 1u << 30;  // a frame longer than this is a broken stream

// False when the peer is gone (EPIPE, ECONNRESET, ...).
bool write_frame(int fd, const std::vector<std::uint8_t>& payload);
std::optional<std::vector<std::uint8_t>> read_frame(int fd);

// A message as one frame: msgpack of a JSON object.
bool write_message(int fd, const nlohmann::json& message);
// nullopt at EOF, on a broken stream or on bytes that are not msgpack.
std::optional<nlohmann::json> read_message(int fd);

}  // namespace fp4serve::engine::ipc
