// The message kinds on the front-end <-> engine process socket (each a msgpack map with "t"):
//   front-end -> engine: submit {req}, abort {id}, stats {q}, stall {on}, corrupt_gdn {on},
//                        segfault, shutdown {drain_ms}
//   engine -> front-end: ready {info, pid} once the engine is up, ack {id, ok, reason, what} per
//                        submit, out {out} per RequestOutput, stats {q, stats}, bye (after shutdown)
#pragma once

namespace fp4serve::engine::ipc::msg {

inline constexpr const char* kSubmit = "submit";
inline constexpr const char* kAbort = "abort";
inline constexpr const char* kStats = "stats";
inline constexpr const char* kStall = "stall";
inline constexpr const char* kCorruptGdn = "corrupt_gdn";
inline constexpr const char* kSegfault = "segfault";
inline constexpr const char* kShutdown = "shutdown";
inline constexpr const char* kReady = "ready";
inline constexpr const char* kAck = "ack";
inline constexpr const char* kOutput = "out";
inline constexpr const char* kBye = "bye";

}  // namespace fp4serve::engine::ipc::msg
