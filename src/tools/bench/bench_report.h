// The "Serving Benchmark Result" table exactly as vllm/benchmarks/serve.py prints it
// ("{:<40} {:<10}" rows, section headers centred in 50 columns) and the matching result keys.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_metrics.h"

namespace fp4serve::tools::bench {

struct TableOptions {
  double duration_s = 0.0;
  std::optional<int> max_concurrency;
  double request_rate = 0.0;  // inf = not printed
  bool goodput = false;
  std::vector<std::string> percentile_metrics;  // ttft, tpot, itl, e2el, client_queue_time, ...
  std::vector<double> client_queue_times;       // only used when max_concurrency is set
  std::vector<double> e2els_including_queue;    // only with max_concurrency and a finite rate
  std::vector<double> percentiles;
};

// Python's str(float): "inf", "10.0", "2.5".
std::string python_float_str(double v);

// Prints the table into `table` (ending with the "=====" line and a newline) and adds the
// per-metric keys (mean_/median_/std_/pNN_<metric>_ms) to `result` in vLLM's order.
void format_result_table(const BenchmarkMetrics& m, const TableOptions& opts, std::string& table,
                         nlohmann::ordered_json& result);

}  // namespace fp4serve::tools::bench
