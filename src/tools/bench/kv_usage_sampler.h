// Polls GET /metrics while a benchmark runs and records vllm:kv_cache_usage_perc (0..1), so the
// report can say how full the KV cache got (the seeds quote "KV cache peaking at 55%"), and the
// SVG plot can draw it over time. Failed polls are skipped silently: a server without /metrics
// just yields no samples.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench/http_client.h"

namespace fp4serve::tools::bench {

struct KvUsageSample {
  double time = 0.0;   // perf_counter() seconds
  double usage = 0.0;  // fraction 0..1
};

// The largest vllm:kv_cache_usage_perc value in a Prometheus text page (any labels), or nullopt.
std::optional<double> parse_kv_cache_usage(const std::string& metrics_text);

class KvUsageSampler {
 public:
  KvUsageSampler(BaseUrl base, HeaderMap headers, double interval_s);
  ~KvUsageSampler();
  void start();
  void stop();  // idempotent; takes one last sample
  std::vector<KvUsageSample> samples() const;
  std::optional<double> peak() const;

 private:
  void sample_once();
  void loop();

  BaseUrl base_;
  HeaderMap headers_;
  double interval_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<KvUsageSample> samples_;
  std::thread thread_;
};

}  // namespace fp4serve::tools::bench
