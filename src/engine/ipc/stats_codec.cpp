#include "engine/ipc/stats_codec.h"

#include <utility>

namespace fp4serve::engine::ipc {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json encode_histogram(const Histogram& h) {
  return json{{"bounds", h.upper_bounds()}, {"counts", h.counts()}, {"count", h.count()}, {"sum", h.sum()}};
}

Histogram decode_histogram(const json& j) {
  return Histogram::restore(j.at("bounds").get<std::vector<double>>(), j.at("counts").get<std::vector<std::uint64_t>>(),
                            j.at("count").get<std::uint64_t>(), j.at("sum").get<double>());
}

// Every histogram of EngineStats by name, for both directions.
template <typename Stats, typename F>
void for_each_histogram(Stats& s, F&& f) {
  f("ttft", s.time_to_first_token);
  f("itl", s.inter_token_latency);
  f("e2e", s.e2e_request_latency);
  f("queue", s.request_queue_time);
  f("iteration_tokens", s.iteration_tokens);
  f("engine_step_duration", s.engine_step_duration);
  f("prefill", s.request_prefill_time);
  f("decode", s.request_decode_time);
  f("inference", s.request_inference_time);
  f("tpot", s.request_time_per_output_token);
  f("params_n", s.request_params_n);
  f("prompt_tokens", s.request_prompt_tokens);
  f("generation_tokens", s.request_generation_tokens);
  f("max_num_generation_tokens", s.request_max_num_generation_tokens);
  f("params_max_tokens", s.request_params_max_tokens);
}

json encode_scheduler(const SchedulerMetrics& m) {
  const SpecDecodeMetrics& sd = m.spec_decode;
  return json{{"num_running", m.num_running},
              {"num_waiting", m.num_waiting},
              {"kv_cache_usage", m.kv_cache_usage},
              {"state_slots_in_use", m.state_slots_in_use},
              {"state_slots_total", m.state_slots_total},
              {"snapshots_committed", m.snapshots_committed},
              {"snapshots_capacity", m.snapshots_capacity},
              {"prefix_cache_queries", m.prefix_cache_queries},
              {"prefix_cache_hits", m.prefix_cache_hits},
              {"num_preemptions", m.num_preemptions},
              {"prompt_tokens_computed", m.prompt_tokens_computed},
              {"prompt_tokens_forked", m.prompt_tokens_forked},
              {"generation_tokens", m.generation_tokens},
              {"kv_block_evictions", m.kv_block_evictions},
              {"snapshot_evictions", m.snapshot_evictions},
              {"num_steps", m.num_steps},
              {"spec_num_speculative_tokens", sd.num_speculative_tokens},
              {"spec_num_drafts", sd.num_drafts},
              {"spec_num_draft_tokens", sd.num_draft_tokens},
              {"spec_num_accepted_tokens", sd.num_accepted_tokens},
              {"spec_accepted_per_pos", sd.num_accepted_tokens_per_pos}};
}

SchedulerMetrics decode_scheduler(const json& j) {
  SchedulerMetrics m;
  m.num_running = j.at("num_running").get<int>();
  m.num_waiting = j.at("num_waiting").get<int>();
  m.kv_cache_usage = j.at("kv_cache_usage").get<double>();
  m.state_slots_in_use = j.at("state_slots_in_use").get<int>();
  m.state_slots_total = j.at("state_slots_total").get<int>();
  m.snapshots_committed = j.at("snapshots_committed").get<int>();
  m.snapshots_capacity = j.at("snapshots_capacity").get<int>();
  m.prefix_cache_queries = j.at("prefix_cache_queries").get<std::int64_t>();
  m.prefix_cache_hits = j.at("prefix_cache_hits").get<std::int64_t>();
  m.num_preemptions = j.at("num_preemptions").get<std::int64_t>();
  m.prompt_tokens_computed = j.at("prompt_tokens_computed").get<std::int64_t>();
  m.prompt_tokens_forked = j.at("prompt_tokens_forked").get<std::int64_t>();
  m.generation_tokens = j.at("generation_tokens").get<std::int64_t>();
  m.kv_block_evictions = j.at("kv_block_evictions").get<std::int64_t>();
  m.snapshot_evictions = j.at("snapshot_evictions").get<std::int64_t>();
  m.num_steps = j.at("num_steps").get<std::int64_t>();
  SpecDecodeMetrics& sd = m.spec_decode;
  sd.num_speculative_tokens = j.at("spec_num_speculative_tokens").get<int>();
  sd.num_drafts = j.at("spec_num_drafts").get<std::int64_t>();
  sd.num_draft_tokens = j.at("spec_num_draft_tokens").get<std::int64_t>();
  sd.num_accepted_tokens = j.at("spec_num_accepted_tokens").get<std::int64_t>();
  const auto per_pos = j.at("spec_accepted_per_pos").get<std::vector<std::int64_t>>();
  for (std::size_t i = 0; i < per_pos.size() && i < sd.num_accepted_tokens_per_pos.size(); ++i)
    sd.num_accepted_tokens_per_pos[i] = per_pos[i];
  return m;
}

}  // namespace

json encode_engine_stats(const EngineStats& s) {
  json j{{"scheduler", encode_scheduler(s.scheduler)},
         {"finished", s.requests_finished},
         // steady_clock is CLOCK_MONOTONIC: one clock for every process on the host.
         {"last_progress_ns",
          std::chrono::duration_cast<std::chrono::nanoseconds>(s.last_progress.time_since_epoch()).count()},
         {"has_work", s.has_work},
         {"num_steps", s.num_steps},
         {"engine_restarts", s.engine_restarts}};
  json hist = json::object();
  for_each_histogram(s, [&](const char* name, const Histogram& h) { hist[name] = encode_histogram(h); });
  j["histograms"] = std::move(hist);
  return j;
}

EngineStats decode_engine_stats(const json& j) {
  EngineStats s;
  s.scheduler = decode_scheduler(j.at("scheduler"));
  s.requests_finished = j.at("finished").get<std::map<std::string, std::int64_t>>();
  s.last_progress = Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(j.at("last_progress_ns").get<std::int64_t>())));
  s.has_work = j.at("has_work").get<bool>();
  s.num_steps = j.at("num_steps").get<std::int64_t>();
  s.engine_restarts = j.at("engine_restarts").get<std::int64_t>();
  const json& hist = j.at("histograms");
  for_each_histogram(s, [&](const char* name, Histogram& h) { h = decode_histogram(hist.at(name)); });
  return s;
}

}  // namespace fp4serve::engine::ipc
