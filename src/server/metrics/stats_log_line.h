// The periodic engine stats line vLLM logs every VLLM_LOG_STATS_INTERVAL seconds
// (LoggingStatLogger.log in vllm/v1/metrics/loggers.py), computed from two EngineStats
// snapshots:
//
//   Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 5.4 tokens/s,
//   Running: 1 reqs, Waiting: 14 reqs, GPU KV cache usage: 76.5%, Prefix cache hit rate: 92.0%
//
// (one line). "Preemptions: N" (preemptions in this interval) is inserted after "Waiting" only
// when N > 0, as vLLM does. Prompt throughput counts computed prompt tokens (cache hits excluded).
// The line is logged at DEBUG instead of INFO when this and the previous interval both had zero
// throughput (vLLM's idle rule).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <tuple>

#include "engine/engine_stats.h"

namespace fp4serve::server::metrics {

// vLLM's CachingMetrics: hit rate over the most recent ~1000 requests' prefix-cache lookups.
// Each observation is (requests, queried tokens, hit tokens); the oldest observations are dropped
// while more than max_recent_requests requests are aggregated (the newest is always kept).
class PrefixCacheHitRateWindow {
 public:
  explicit PrefixCacheHitRateWindow(std::int64_t max_recent_requests = 1000) : max_requests_(max_recent_requests) {}
  void observe(std::int64_t requests, std::int64_t queries, std::int64_t hits);
  double hit_rate() const;  // 0..1; 0 when nothing was queried

 private:
  std::int64_t max_requests_;
  std::deque<std::tuple<std::int64_t, std::int64_t, std::int64_t>> window_;
  std::int64_t requests_ = 0;
  std::int64_t queries_ = 0;
  std::int64_t hits_ = 0;
};

struct StatsLogLine {
  std::string text;   // "Engine 000: Avg prompt throughput: ..."
  bool idle = false;  // log at DEBUG rather than INFO
  // vLLM's SpecDecodingLogging line for the interval (v1/spec_decode/metrics.py), logged after
  // `text`; empty when no request verified drafts in it:
  //   SpecDecoding metrics: Mean acceptance length: 2.37, Accepted throughput: 3.10 tokens/s,
  //   Drafted throughput: 6.00 tokens/s, Accepted: 31 tokens, Drafted: 60 tokens,
  //   Per-position acceptance rate: 0.750, 0.450, Avg Draft acceptance rate: 51.7%
  std::string spec_decode;
};

// The SpecDecoding line between two snapshots (empty without drafts in between).
std::string spec_decode_log_line(const engine::SpecDecodeMetrics& previous, const engine::SpecDecodeMetrics& current,
                                 double elapsed_seconds);

class StatsLogger {
 public:
  explicit StatsLogger(int engine_index = 0) : engine_index_(engine_index) {}

  // One log interval: `previous` and `current` are snapshots taken `elapsed_seconds` apart.
  StatsLogLine log(const engine::EngineStats& previous, const engine::EngineStats& current, double elapsed_seconds);

 private:
  int engine_index_;
  double last_prompt_throughput_ = 0.0;
  double last_generation_throughput_ = 0.0;
  PrefixCacheHitRateWindow hit_rate_;
};

// Requests that finished between the snapshots (all finish reasons): the request count fed to the
// hit-rate window. EngineStats has no count of prefix-cache lookups per request; in steady state
// requests finished per interval equals requests admitted per interval.
std::int64_t requests_finished_between(const engine::EngineStats& previous, const engine::EngineStats& current);

}  // namespace fp4serve::server::metrics
