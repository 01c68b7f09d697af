#include "server/metrics/stats_log_line.h"

#include <cstdio>

namespace fp4serve::server::metrics {

void PrefixCacheHitRateWindow::observe(std::int64_t requests, std::int64_t queries, std::int64_t hits) {
  if (requests == 0) return;  // vLLM does not let empty observations push real ones out
  window_.emplace_back(requests, queries, hits);
  requests_ += requests;
  queries_ += queries;
  hits_ += hits;
  while (window_.size() > 1 && requests_ > max_requests_) {
    const auto [r, q, h] = window_.front();
    window_.pop_front();
    requests_ -= r;
    queries_ -= q;
    hits_ -= h;
  }
}

double PrefixCacheHitRateWindow::hit_rate() const {
  if (queries_ == 0) return 0.0;
  return static_cast<double>(hits_) / static_cast<double>(queries_);
}

std::int64_t requests_finished_between(const engine::EngineStats& previous, const engine::EngineStats& current) {
  std::int64_t total = 0;
  for (const auto& [reason, count] : current.requests_finished) {
    const auto it = previous.requests_finished.find(reason);
    total += count - (it == previous.requests_finished.end() ? 0 : it->second);
  }
  return total;
}

StatsLogLine StatsLogger::log(const engine::EngineStats& previous, const engine::EngineStats& current,
                              double elapsed_seconds) {
  const engine::SchedulerMetrics& prev = previous.scheduler;
  const engine::SchedulerMetrics& cur = current.scheduler;
  const auto per_second = [&](std::int64_t delta) {
    return elapsed_seconds > 0.0 ? static_cast<double>(delta) / elapsed_seconds : 0.0;
  };
  const double prompt_throughput = per_second(cur.prompt_tokens_computed - prev.prompt_tokens_computed);
  const double generation_throughput = per_second(cur.generation_tokens - prev.generation_tokens);
  const std::int64_t preemptions = cur.num_preemptions - prev.num_preemptions;

  const std::int64_t queries = cur.prefix_cache_queries - prev.prefix_cache_queries;
  const std::int64_t hits = cur.prefix_cache_hits - prev.prefix_cache_hits;
  std::int64_t requests = requests_finished_between(previous, current);
  if (requests <= 0 && queries > 0) requests = 1;  // lookups happened: keep them in the window
  hit_rate_.observe(requests, queries, hits);

  StatsLogLine line;
  line.idle = prompt_throughput == 0.0 && generation_throughput == 0.0 && last_prompt_throughput_ == 0.0 &&
              last_generation_throughput_ == 0.0;
  last_prompt_throughput_ = prompt_throughput;
  last_generation_throughput_ = generation_throughput;

  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
                "Running: %d reqs, Waiting: %d reqs",
                engine_index_, prompt_throughput, generation_throughput, cur.num_running, cur.num_waiting);
  line.text = buf;
  if (preemptions > 0) {
    std::snprintf(buf, sizeof(buf), ", Preemptions: %lld", static_cast<long long>(preemptions));
    line.text += buf;
  }
  std::snprintf(buf, sizeof(buf), ", GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
                cur.kv_cache_usage * 100.0, hit_rate_.hit_rate() * 100.0);
  line.text += buf;
  line.spec_decode = spec_decode_log_line(prev.spec_decode, cur.spec_decode, elapsed_seconds);
  return line;
}

std::string spec_decode_log_line(const engine::SpecDecodeMetrics& previous, const engine::SpecDecodeMetrics& current,
                                 double elapsed_seconds) {
  const std::int64_t drafts = current.num_drafts - previous.num_drafts;
  if (drafts <= 0) return {};
  const std::int64_t drafted = current.num_draft_tokens - previous.num_draft_tokens;
  const std::int64_t accepted = current.num_accepted_tokens - previous.num_accepted_tokens;
  const double seconds = elapsed_seconds > 0.0 ? elapsed_seconds : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
                "Drafted throughput: %.2f tokens/s, Accepted: %lld tokens, Drafted: %lld tokens, "
                "Per-position acceptance rate: ",
                1.0 + static_cast<double>(accepted) / static_cast<double>(drafts),
                seconds > 0 ? static_cast<double>(accepted) / seconds : 0.0,
                seconds > 0 ? static_cast<double>(drafted) / seconds : 0.0, static_cast<long long>(accepted),
                static_cast<long long>(drafted));
  std::string text = buf;
  for (int pos = 0; pos < current.num_speculative_tokens && pos < engine::kMaxSpeculativeTokens; ++pos) {
    const auto i = static_cast<std::size_t>(pos);
    std::snprintf(buf, sizeof(buf), "%s%.3f", pos == 0 ? "" : ", ",
                  static_cast<double>(current.num_accepted_tokens_per_pos[i] - previous.num_accepted_tokens_per_pos[i]) /
                      static_cast<double>(drafts));
    text += buf;
  }
  if (drafted > 0) {
    std::snprintf(buf, sizeof(buf), ", Avg Draft acceptance rate: %.1f%%",
                  100.0 * static_cast<double>(accepted) / static_cast<double>(drafted));
  } else {
    std::snprintf(buf, sizeof(buf), ", Avg Draft acceptance rate: nan%%");
  }
  return text + buf;
}

}  // namespace fp4serve::server::metrics
