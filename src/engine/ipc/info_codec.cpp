#include "engine/ipc/info_codec.h"

namespace fp4serve::engine::ipc {

using nlohmann::json;

json encode_engine_info(const EngineInfo& i) {
  const CachePlan& c = i.cache;
  json cache{{"max_num_seqs", c.max_num_seqs},
             {"num_state_slots", c.num_state_slots},
             {"num_snapshots", c.num_snapshots},
             {"num_kv_blocks", c.num_kv_blocks},
             {"num_rollback_entries", c.num_rollback_entries},
             {"state_bytes", c.state_bytes},
             {"snapshot_bytes", c.snapshot_bytes},
             {"kv_bytes", c.kv_bytes},
             {"rollback_bytes", c.rollback_bytes},
             {"kv_tokens", c.kv_tokens},
             {"max_concurrency", c.max_concurrency},
             {"log_lines", c.log_lines}};
  return json{{"max_model_len", i.max_model_len},
              {"max_num_seqs", i.max_num_seqs},
              {"max_num_batched_tokens", i.max_num_batched_tokens},
              {"block_size", i.block_size},
              {"vocab_size", i.vocab_size},
              {"valid_vocab_size", i.valid_vocab_size},
              {"cache", std::move(cache)},
              {"prefix_caching", i.prefix_caching},
              {"kv_cache_dtype", i.kv_cache_dtype}};
}

EngineInfo decode_engine_info(const json& j) {
  EngineInfo i;
  i.max_model_len = j.at("max_model_len").get<int>();
  i.max_num_seqs = j.at("max_num_seqs").get<int>();
  i.max_num_batched_tokens = j.at("max_num_batched_tokens").get<int>();
  i.block_size = j.at("block_size").get<int>();
  i.vocab_size = j.at("vocab_size").get<std::int64_t>();
  i.valid_vocab_size = j.at("valid_vocab_size").get<std::int64_t>();
  const json& c = j.at("cache");
  i.cache.max_num_seqs = c.at("max_num_seqs").get<int>();
  i.cache.num_state_slots = c.at("num_state_slots").get<int>();
  i.cache.num_snapshots = c.at("num_snapshots").get<int>();
  i.cache.num_kv_blocks = c.at("num_kv_blocks").get<int>();
  i.cache.num_rollback_entries = c.at("num_rollback_entries").get<int>();
  i.cache.state_bytes = c.at("state_bytes").get<std::uint64_t>();
  i.cache.snapshot_bytes = c.at("snapshot_bytes").get<std::uint64_t>();
  i.cache.kv_bytes = c.at("kv_bytes").get<std::uint64_t>();
  i.cache.rollback_bytes = c.at("rollback_bytes").get<std::uint64_t>();
  i.cache.kv_tokens = c.at("kv_tokens").get<std::int64_t>();
  i.cache.max_concurrency = c.at("max_concurrency").get<double>();
  i.cache.log_lines = c.at("log_lines").get<std::vector<std::string>>();
  i.prefix_caching = j.at("prefix_caching").get<bool>();
  i.kv_cache_dtype = j.at("kv_cache_dtype").get<std::string>();
  return i;
}

}  // namespace fp4serve::engine::ipc
