#include "tools/bench/bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fp4serve::tools::bench {

double numpy_percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

MetricSummary summarize_seconds(const std::vector<double>& s, const std::vector<double>& percentiles) {
  MetricSummary m;
  if (!s.empty()) {
    const double mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
    double var = 0.0;
    for (double x : s) var += (x - mean) * (x - mean);
    m.mean_ms = mean * 1000.0;
    m.std_ms = std::sqrt(var / static_cast<double>(s.size())) * 1000.0;
    m.median_ms = numpy_percentile(s, 50.0) * 1000.0;
  }
  for (double p : percentiles) m.percentiles_ms.emplace_back(p, numpy_percentile(s, p) * 1000.0);
  return m;
}

BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double dur_s,
                                   const std::vector<double>& percentiles, const std::map<std::string, double>& goodput,
                                   const TokenCounter& count_tokens) {
  BenchmarkMetrics m;
  std::vector<double> itls, tpots, all_tpots, ttfts, e2els;
  long long total_output = 0;
  for (const RequestOutput& o : outputs) {
    if (!o.success) {
      m.actual_output_lens.push_back(0);
      ++m.failed;
      continue;
    }
    int output_len = o.output_tokens;
    if (output_len == 0) output_len = count_tokens ? count_tokens(o.generated_text) : 1;
    m.actual_output_lens.push_back(output_len);
    total_output += output_len;
    m.total_input += o.prompt_len;
    double tpot = 0.0;
    if (output_len > 1) {
      tpot = (o.latency - o.ttft) / (output_len - 1);
      tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
    ++m.completed;
  }

  int good_completed = 0;
  if (!goodput.empty()) {
    for (std::size_t i = 0; i < ttfts.size(); ++i) {
      bool good = true;
      if (auto it = goodput.find("ttft"); it != goodput.end()) good = good && it->second / 1000.0 >= ttfts[i];
      if (auto it = goodput.find("tpot"); it != goodput.end()) good = good && it->second / 1000.0 >= all_tpots[i];
      if (auto it = goodput.find("e2el"); it != goodput.end()) good = good && it->second / 1000.0 >= e2els[i];
      good_completed += good ? 1 : 0;
    }
  }

  // Peak output tokens per second over 1-s buckets, and exact peak concurrency (sweep line over
  // half-open [start, end) intervals, departures before arrivals at equal times).
  double min_start = 0.0, max_end = 0.0;
  bool any = false;
  for (const RequestOutput& o : outputs) {
    if (!o.success) continue;
    min_start = any ? std::min(min_start, o.start_time) : o.start_time;
    max_end = any ? std::max(max_end, o.start_time + o.latency) : o.start_time + o.latency;
    any = true;
  }
  if (any) {
    const auto buckets = static_cast<std::size_t>(std::ceil(max_end - min_start)) + 1;
    m.tokens_per_second.assign(buckets, 0.0);
    std::vector<std::pair<double, int>> events;
    for (const RequestOutput& o : outputs) {
      if (!o.success) continue;
      double t = o.start_time + o.ttft;
      auto add = [&](double tt) {
        const auto b = static_cast<long long>(tt - min_start);
        if (b >= 0 && static_cast<std::size_t>(b) < buckets) m.tokens_per_second[static_cast<std::size_t>(b)] += 1.0;
      };
      add(t);
      for (double d : o.itl) add(t += d);
      events.emplace_back(o.start_time, 1);
      events.emplace_back(o.start_time + o.latency, -1);
    }
    std::sort(events.begin(), events.end());
    int cur = 0;
    for (const auto& e : events) m.max_concurrent_requests = std::max(m.max_concurrent_requests, cur += e.second);
    m.max_output_tokens_per_s = *std::max_element(m.tokens_per_second.begin(), m.tokens_per_second.end());
  }

  m.total_output = total_output;
  m.request_throughput = m.completed / dur_s;
  m.request_goodput = good_completed / dur_s;
  m.output_throughput = static_cast<double>(total_output) / dur_s;
  m.total_token_throughput = static_cast<double>(m.total_input + total_output) / dur_s;
  m.ttft = summarize_seconds(ttfts, percentiles);
  m.tpot = summarize_seconds(tpots, percentiles);
  m.itl = summarize_seconds(itls, percentiles);
  m.e2el = summarize_seconds(e2els, percentiles);
  return m;
}

}  // namespace fp4serve::tools::bench
