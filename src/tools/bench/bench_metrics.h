// calculate_metrics of vllm/benchmarks/serve.py: the aggregate numbers of a run from the
// per-request outputs. Statistics follow numpy (population std, linear-interpolated percentiles,
// and 0 for an empty list, as np.mean(x or 0) gives).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/bench/request_func.h"

namespace fp4serve::tools::bench {

struct MetricSummary {
  double mean_ms = 0.0;
  double median_ms = 0.0;
  double std_ms = 0.0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

// np.percentile(values, p) with the default linear method; values need not be sorted.
double numpy_percentile(std::vector<double> values, double p);
MetricSummary summarize_seconds(const std::vector<double>& seconds, const std::vector<double>& percentiles);

struct BenchmarkMetrics {
  int completed = 0;
  int failed = 0;
  long long total_input = 0;
  long long total_output = 0;
  double request_throughput = 0.0;
  double request_goodput = 0.0;
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;
  MetricSummary ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0.0;
  int max_concurrent_requests = 0;
  std::vector<int> actual_output_lens;     // per request, 0 for failed ones
  std::vector<double> tokens_per_second;   // 1-s buckets from the first start (vLLM's peak data)
};

// Counts the tokens of a generated text when the server sent no usage (vLLM re-tokenises).
using TokenCounter = std::function<int(const std::string&)>;

// goodput: SLO name ("ttft", "tpot", "e2el") -> milliseconds; empty = not requested.
BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double dur_s,
                                   const std::vector<double>& percentiles, const std::map<std::string, double>& goodput,
                                   const TokenCounter& count_tokens);

}  // namespace fp4serve::tools::bench
