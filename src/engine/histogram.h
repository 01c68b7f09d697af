// A Prometheus-style histogram with fixed upper bounds (vLLM's bucket lists, vllm/v1/metrics/
// loggers.py), kept by the engine and rendered by the server's /metrics exposition.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fp4serve::engine {

class Histogram {
 public:
  Histogram() = default;
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implicit

  // A histogram with these contents (the engine process's stats, decoded by the front-end).
  static Histogram restore(std::vector<double> upper_bounds, std::vector<std::uint64_t> counts, std::uint64_t count,
                           double sum) {
    Histogram h;
    h.bounds_ = std::move(upper_bounds);
    h.counts_ = std::move(counts);
    h.count_ = count;
    h.sum_ = sum;
    return h;
  }

  void observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // counts()[i] = observations <= upper_bounds()[i] and > the previous bound (not cumulative);
  // counts().back() is the +Inf bucket (size = bounds + 1).
  const std::vector<std::uint64_t>& counts() const { return counts_; }
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_ = {0};
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

// vLLM's buckets.
std::vector<double> ttft_buckets_seconds();         // vllm:time_to_first_token_seconds
std::vector<double> inter_token_buckets_seconds();  // vllm:inter_token_latency_seconds
std::vector<double> request_latency_buckets_seconds();  // e2e, queue, prefill, decode, inference
std::vector<double> iteration_tokens_buckets();     // vllm:iteration_tokens_total
// fp4serve:engine_step_duration_seconds (no vLLM counterpart): 2^(k/4) s from 2^-12 (0.24 ms) to 2^7
// (128 s), so that a percentile read off the buckets is within 19% of the true one and issue 16's
// "no step above 3x the median step" can be judged from /metrics (scripts/gpu_report.py does).
std::vector<double> step_duration_buckets_seconds();
// 1, 2, 5, 10, 20, 50, ... up to max_value (vLLM build_1_2_5_buckets), for per-request token counts.
std::vector<double> one_two_five_buckets(double max_value);

}  // namespace fp4serve::engine
