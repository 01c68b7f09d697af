// Statistics as numpy computes them, vLLM's aggregate definitions, and the printed table's exact
// layout ("{:<40} {:<10}" rows, 50-column centred section headers).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tools/bench/bench_metrics.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/sse_stream.h"

namespace fp4serve::tools::bench {
namespace {

TEST(BenchStats, PercentileMedianAndStdMatchNumpy) {
  const std::vector<double> x = {0.3, 0.1, 0.25, 0.7, 0.05};
  // np.percentile(x, 99), (x, 50), (x, 90), (x, 12.5); np.std(x)
  EXPECT_NEAR(numpy_percentile(x, 99), 0.6839999999999999, 1e-15);
  EXPECT_NEAR(numpy_percentile(x, 50), 0.25, 1e-15);
  EXPECT_NEAR(numpy_percentile(x, 90), 0.54, 1e-15);
  EXPECT_NEAR(numpy_percentile(x, 12.5), 0.075, 1e-15);
  const MetricSummary s = summarize_seconds(x, {99});
  EXPECT_NEAR(s.std_ms, 229.3468988235943, 1e-9);
  EXPECT_NEAR(s.mean_ms, 280.0, 1e-9);
  const MetricSummary empty = summarize_seconds({}, {99});
  EXPECT_EQ(empty.mean_ms, 0.0);
  EXPECT_EQ(empty.percentiles_ms.at(0).second, 0.0);
}

RequestOutput output(double start, double ttft, std::vector<double> itl, int tokens, int prompt) {
  RequestOutput o;
  o.success = true;
  o.start_time = start;
  o.ttft = ttft;
  o.itl = std::move(itl);
  o.latency = ttft;
  for (double d : o.itl) o.latency += d;
  o.output_tokens = tokens;
  o.prompt_len = prompt;
  return o;
}

TEST(BenchStats, AggregatesFollowVllmDefinitions) {
  std::vector<RequestOutput> outs = {output(100.0, 0.5, {0.1, 0.1, 0.1}, 4, 10), output(100.2, 0.3, {0.2}, 2, 20)};
  RequestOutput failed;
  failed.error = "boom";
  outs.push_back(failed);
  const BenchmarkMetrics m = calculate_metrics(outs, 2.0, {50, 99}, {{"ttft", 400.0}}, nullptr);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);
  EXPECT_EQ(m.total_output, 6);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 18.0);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);  // only the 300 ms TTFT meets 400 ms
  // TPOT = (latency - ttft) / (tokens - 1): 0.3/3 and 0.2/1 -> mean 150 ms
  EXPECT_NEAR(m.tpot.mean_ms, 150.0, 1e-9);
  // ITL pooled over all gaps: 0.1, 0.1, 0.1, 0.2
  EXPECT_NEAR(m.itl.mean_ms, 125.0, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 400.0, 1e-9);
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // token times 100.5..100.8 and 100.5, 100.7: all in the first 1-s bucket
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 6.0);
  EXPECT_EQ(m.actual_output_lens, (std::vector<int>{4, 2, 0}));
}

TEST(BenchStats, OutputTokensAreCountedWhenUsageIsMissing) {
  RequestOutput o = output(1.0, 0.1, {0.1}, 0, 5);
  o.generated_text = "a b c";
  const BenchmarkMetrics m =
      calculate_metrics({o}, 1.0, {99}, {}, [](const std::string& t) { return static_cast<int>(t.size() + 1) / 2; });
  EXPECT_EQ(m.total_output, 3);
  const BenchmarkMetrics no_counter = calculate_metrics({o}, 1.0, {99}, {}, nullptr);
  EXPECT_EQ(no_counter.total_output, 1);
}

TEST(BenchReport, TableHasVllmRowsAndWidths) {
  BenchmarkMetrics m;
  m.completed = 32;
  m.failed = 0;
  m.total_input = 2048;
  m.total_output = 1024;
  m.request_throughput = 1.5;
  m.output_throughput = 48.0;
  m.max_output_tokens_per_s = 64.0;
  m.max_concurrent_requests = 32;
  m.total_token_throughput = 144.0;
  const MetricSummary s{12.25, 11.0, 1.0, {{99, 20.0}}};
  m.ttft = m.tpot = m.itl = m.e2el = s;
  TableOptions o;
  o.duration_s = 21.333;
  o.request_rate = std::numeric_limits<double>::infinity();
  o.percentile_metrics = {"ttft", "tpot", "itl"};
  o.percentiles = {99};
  std::string table;
  nlohmann::ordered_json result;
  format_result_table(m, o, table, result);
  const std::string expected =
      "============ Serving Benchmark Result ============\n"
      "Successful requests:                     32        \n"
      "Failed requests:                         0         \n"
      "Benchmark duration (s):                  21.33     \n"
      "Total input tokens:                      2048      \n"
      "Total generated tokens:                  1024      \n"
      "Request throughput (req/s):              1.50      \n"
      "Output token throughput (tok/s):         48.00     \n"
      "Peak output token throughput (tok/s):    64.00     \n"
      "Peak concurrent requests:                32.00     \n"
      "Total token throughput (tok/s):          144.00    \n"
      "---------------Time to First Token----------------\n"
      "Mean TTFT (ms):                          12.25     \n"
      "Median TTFT (ms):                        11.00     \n"
      "P99 TTFT (ms):                           20.00     \n"
      "-----Time per Output Token (excl. 1st token)------\n"
      "Mean TPOT (ms):                          12.25     \n"
      "Median TPOT (ms):                        11.00     \n"
      "P99 TPOT (ms):                           20.00     \n"
      "---------------Inter-token Latency----------------\n"
      "Mean ITL (ms):                           12.25     \n"
      "Median ITL (ms):                         11.00     \n"
      "P99 ITL (ms):                            20.00     \n"
      "==================================================\n";
  EXPECT_EQ(table, expected);
  EXPECT_EQ(result.size(), 12u);  // mean/median/std/p99 for three metrics
  EXPECT_TRUE(result.contains("p99_itl_ms"));
  EXPECT_FALSE(result.contains("mean_e2el_ms"));
}

TEST(BenchReport, OptionalRowsAppearWhenConfigured) {
  BenchmarkMetrics m;
  TableOptions o;
  o.max_concurrency = 8;
  o.request_rate = 4.0;
  o.goodput = true;
  o.percentile_metrics = {"e2el", "client_queue_time"};
  o.percentiles = {50, 99.9};
  o.client_queue_times = {0.001};
  m.e2el = summarize_seconds({0.5, 0.25}, o.percentiles);
  std::string t;
  nlohmann::ordered_json r;
  format_result_table(m, o, t, r);
  EXPECT_NE(t.find("Maximum request concurrency:             8         \n"), std::string::npos);
  EXPECT_NE(t.find("Request rate configured (RPS):           4.00      \n"), std::string::npos);
  EXPECT_NE(t.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(t.find("----------------End-to-end Latency----------------\n"), std::string::npos);
  EXPECT_NE(t.find("P99.9 E2EL (ms):"), std::string::npos);
  EXPECT_NE(t.find("P50 Client Queue Time (ms):"), std::string::npos);
  EXPECT_EQ(t.find("TTFT"), std::string::npos);
  EXPECT_TRUE(r.contains("p99.9_e2el_ms"));
  EXPECT_TRUE(r.contains("mean_client_queue_time_ms"));
}

TEST(BenchReport, PythonFloatStrings) {
  EXPECT_EQ(python_float_str(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_str(10.0), "10.0");
  EXPECT_EQ(python_float_str(2.5), "2.5");
}

TEST(BenchSse, MessagesSplitAcrossNetworkChunks) {
  SseMessageSplitter s;
  EXPECT_TRUE(s.add("data: {\"a\":").empty());
  auto m = s.add("1}\n\ndata: {\"b\"");
  // The first message ends at "\n\n"; the incomplete JSON waits.
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], "data: {\"a\":1}");
  m = s.add(":2}");  // complete JSON without the blank line yet: taken (vLLM does the same)
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], "data: {\"b\":2}");
  m = s.add("\n\n: ping\n\ndata: [DONE]");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], ": ping");
  EXPECT_EQ(m[1], "data: [DONE]");
}

}  // namespace
}  // namespace fp4serve::tools::bench
