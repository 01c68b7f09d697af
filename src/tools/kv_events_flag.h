// vLLM's --kv-events-config (a JSON object; vllm/config/kv_events.py KVEventsConfig): KV cache events
// for KV-aware routers, published by the engine (engine/kv_events.h). Every field vLLM has, with its
// type and default; publisher defaults to "zmq" when enable_kv_cache_events is true (vLLM
// __post_init__). An unknown key, a wrong type or a value the publisher cannot use is refused with
// the field named, never ignored.
#pragma once

#include <string>

#include "engine/kv_events.h"

namespace CLI {
class App;
}

namespace fp4serve::tools {

// Registers --kv-events-config on a subcommand, checked as it is parsed (before the model loads).
void add_kv_events_flag(CLI::App& cmd, std::string& json_text);

// "" -> events off. Throws std::runtime_error naming the flag and the field.
engine::KvEventsConfig parse_kv_events_config(const std::string& json_text);

// The start-up log line for the choice ("" when events are off).
std::string kv_events_decision(const engine::KvEventsConfig& config);

}  // namespace fp4serve::tools
