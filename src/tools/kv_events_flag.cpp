#include "tools/kv_events_flag.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <stdexcept>

namespace fp4serve::tools {

namespace {

constexpr const char* kFlag = "--kv-events-config";

[[noreturn]] void fail(const std::string& why) { throw std::runtime_error(fmt::format("{}: {}", kFlag, why)); }

std::string str_field(const std::string& key, const nlohmann::json& v) {
  if (!v.is_string()) fail(fmt::format("{} must be a string (got {})", key, v.dump()));
  return v.get<std::string>();
}

int int_field(const std::string& key, const nlohmann::json& v, int min) {
  if (!v.is_number_integer()) fail(fmt::format("{} must be an integer (got {})", key, v.dump()));
  const auto n = v.get<std::int64_t>();
  if (n < min || n > std::numeric_limits<int>::max())
    fail(fmt::format("{} must be between {} and {} (got {})", key, min, std::numeric_limits<int>::max(), n));
  return static_cast<int>(n);
}

// ZeroMQ transports a publisher can bind or connect.
void check_endpoint(const std::string& key, const std::string& e) {
  for (const char* scheme : {"tcp://", "ipc://", "inproc://"})
    if (e.rfind(scheme, 0) == 0 && e.size() > std::string(scheme).size()) return;
  fail(fmt::format("{} '{}' must be a ZeroMQ endpoint: tcp://*:5557 (bind), tcp://HOST:PORT (connect), ipc://PATH "
                   "or inproc://NAME",
                   key, e));
}

}  // namespace

void add_kv_events_flag(CLI::App& cmd, std::string& json_text) {
  cmd.add_option("--kv-events-config", json_text,
                 "KV cache events for KV-aware routers, vLLM's JSON: '{\"enable_kv_cache_events\": true, "
                 "\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\", "
                 "\"topic\": \"kv-events\"}' (also buffer_steps, hwm, max_queue_size)")
      ->check([](const std::string& text) -> std::string {
        try {
          parse_kv_events_config(text);
        } catch (const std::exception& e) {
          // CLI11 puts the option's name in front itself.
          const std::string what = e.what(), prefix = std::string(kFlag) + ": ";
          return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
        }
        return {};
      });
}

engine::KvEventsConfig parse_kv_events_config(const std::string& text) {
  engine::KvEventsConfig c;
  if (text.empty()) return c;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    fail(fmt::format("'{}' is not a JSON object (example: '{{\"enable_kv_cache_events\": true, \"endpoint\": "
                     "\"tcp://*:5557\", \"topic\": \"kv-events\"}}')",
                     text.substr(0, 200)));
  bool publisher_given = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "enable_kv_cache_events") {
      if (!v.is_boolean()) fail(fmt::format("enable_kv_cache_events must be true or false (got {})", v.dump()));
      c.enable_kv_cache_events = v.get<bool>();
    } else if (key == "publisher") {
      if (v.is_null()) continue;  // vLLM's default: chosen from enable_kv_cache_events below
      c.publisher = str_field(key, v);
      if (c.publisher != "null" && c.publisher != "zmq")
        fail(fmt::format("publisher must be \"null\" or \"zmq\" (got \"{}\")", c.publisher));
      publisher_given = true;
    } else if (key == "endpoint") {
      c.endpoint = str_field(key, v);
      check_endpoint(key, c.endpoint);
    } else if (key == "replay_endpoint") {
      if (v.is_null()) {
        c.replay_endpoint.reset();
        continue;
      }
      c.replay_endpoint = str_field(key, v);
      check_endpoint(key, *c.replay_endpoint);
    } else if (key == "buffer_steps") {
      c.buffer_steps = int_field(key, v, 0);
    } else if (key == "hwm") {
      c.hwm = int_field(key, v, 0);  // 0: ZeroMQ's "no limit"
    } else if (key == "max_queue_size") {
      // vLLM's queue is unbounded at 0; the engine never lets an event queue grow without bound.
      c.max_queue_size = int_field(key, v, 1);
    } else if (key == "topic") {
      c.topic = str_field(key, v);
    } else {
      fail(fmt::format("unknown field '{}' (vLLM's KVEventsConfig has enable_kv_cache_events, publisher, endpoint, "
                       "replay_endpoint, buffer_steps, hwm, max_queue_size, topic)",
                       key));
    }
  }
  if (!publisher_given) c.publisher = c.enable_kv_cache_events ? "zmq" : "null";
  if (c.replay_endpoint && *c.replay_endpoint == c.endpoint)
    fail(fmt::format("replay_endpoint must differ from endpoint ({})", c.endpoint));
  return c;
}

std::string kv_events_decision(const engine::KvEventsConfig& c) {
  if (!c.enable_kv_cache_events) return {};
  if (!c.publishes()) return "--kv-events-config: KV cache events enabled with publisher \"null\": nothing is sent";
  return fmt::format("--kv-events-config: KV cache events (vLLM's KVEventBatch, msgpack) on {} topic '{}'{}, "
                     "replay buffer {} batches, queue {} batches, hwm {}",
                     c.endpoint, c.topic, c.replay_endpoint ? ", replay on " + *c.replay_endpoint : std::string(),
                     c.buffer_steps, c.max_queue_size, c.hwm);
}

}  // namespace fp4serve::tools
