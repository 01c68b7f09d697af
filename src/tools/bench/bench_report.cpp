#include "tools/bench/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fp4serve::tools::bench {

std::string python_float_str(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  if (v == std::floor(v) && std::fabs(v) < 1e16) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);  // shortest round-trip, like repr()
}

namespace {

std::string percentile_word(double p) {
  return p == std::floor(p) ? std::to_string(static_cast<long long>(p)) : fmt::format("{}", p);
}

bool selected(const TableOptions& o, const std::string& name) {
  return std::find(o.percentile_metrics.begin(), o.percentile_metrics.end(), name) != o.percentile_metrics.end();
}

void metric_block(std::string& t, nlohmann::ordered_json& result, const TableOptions& o, const std::string& attr,
                  const std::string& name, const std::string& header, const MetricSummary& s) {
  if (!selected(o, attr)) return;
  t += fmt::format("{:-^50}\n", header);
  t += fmt::format("{:<40} {:<10.2f}\n", "Mean " + name + " (ms):", s.mean_ms);
  t += fmt::format("{:<40} {:<10.2f}\n", "Median " + name + " (ms):", s.median_ms);
  result["mean_" + attr + "_ms"] = s.mean_ms;
  result["median_" + attr + "_ms"] = s.median_ms;
  result["std_" + attr + "_ms"] = s.std_ms;
  for (const auto& [p, v] : s.percentiles_ms) {
    const std::string w = percentile_word(p);
    t += fmt::format("{:<40} {:<10.2f}\n", "P" + w + " " + name + " (ms):", v);
    result["p" + w + "_" + attr + "_ms"] = v;
  }
}

}  // namespace

void format_result_table(const BenchmarkMetrics& m, const TableOptions& o, std::string& t,
                         nlohmann::ordered_json& result) {
  t += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  t += fmt::format("{:<40} {:<10}\n", "Successful requests:", m.completed);
  t += fmt::format("{:<40} {:<10}\n", "Failed requests:", m.failed);
  if (o.max_concurrency) t += fmt::format("{:<40} {:<10}\n", "Maximum request concurrency:", *o.max_concurrency);
  if (!std::isinf(o.request_rate)) t += fmt::format("{:<40} {:<10.2f}\n", "Request rate configured (RPS):", o.request_rate);
  t += fmt::format("{:<40} {:<10.2f}\n", "Benchmark duration (s):", o.duration_s);
  t += fmt::format("{:<40} {:<10}\n", "Total input tokens:", m.total_input);
  t += fmt::format("{:<40} {:<10}\n", "Total generated tokens:", m.total_output);
  t += fmt::format("{:<40} {:<10.2f}\n", "Request throughput (req/s):", m.request_throughput);
  if (o.goodput) t += fmt::format("{:<40} {:<10.2f}\n", "Request goodput (req/s):", m.request_goodput);
  t += fmt::format("{:<40} {:<10.2f}\n", "Output token throughput (tok/s):", m.output_throughput);
  t += fmt::format("{:<40} {:<10.2f}\n", "Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
  t += fmt::format("{:<40} {:<10.2f}\n", "Peak concurrent requests:", static_cast<double>(m.max_concurrent_requests));
  t += fmt::format("{:<40} {:<10.2f}\n", "Total token throughput (tok/s):", m.total_token_throughput);

  metric_block(t, result, o, "ttft", "TTFT", "Time to First Token", m.ttft);
  metric_block(t, result, o, "tpot", "TPOT", "Time per Output Token (excl. 1st token)", m.tpot);
  metric_block(t, result, o, "itl", "ITL", "Inter-token Latency", m.itl);
  metric_block(t, result, o, "e2el", "E2EL", "End-to-end Latency", m.e2el);
  if (o.max_concurrency) {
    metric_block(t, result, o, "client_queue_time", "Client Queue Time", "Client-side Queueing",
                 summarize_seconds(o.client_queue_times, o.percentiles));
    if (!std::isinf(o.request_rate)) {
      metric_block(t, result, o, "e2el_including_client_queue", "E2EL incl. Client Queue",
                   "Queue-inclusive End-to-end Latency", summarize_seconds(o.e2els_including_queue, o.percentiles));
    }
  }
  t += std::string(50, '=') + "\n";
}

}  // namespace fp4serve::tools::bench
