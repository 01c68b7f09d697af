// /metrics exposition: a known EngineStats against a literal, and a check that the output follows
// the Prometheus text format rules (families declared once, sorted well-formed labels,
// cumulative buckets ending at +Inf == _count).
#include "server/metrics/engine_metrics_exposition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "server/metrics/process_metrics.h"
#include "server/metrics/prometheus_text.h"

namespace fp4serve::server::metrics {
namespace {

TEST(PrometheusText, GoFloatStrings) {
  EXPECT_EQ(go_float_string(0), "0.0");
  EXPECT_EQ(go_float_string(1), "1.0");
  EXPECT_EQ(go_float_string(0.001), "0.001");
  EXPECT_EQ(go_float_string(2560), "2560.0");
  EXPECT_EQ(go_float_string(123456), "123456.0");
  EXPECT_EQ(go_float_string(1234567), "1.234567e+06");
  EXPECT_EQ(go_float_string(1e6), "1e+06");
  EXPECT_EQ(go_float_string(1700000000.0), "1.7e+09");
  EXPECT_EQ(go_float_string(1788733924.32), "1.78873392432e+09");
  EXPECT_EQ(go_float_string(1e-05), "1e-05");
  EXPECT_EQ(go_float_string(-2500000.0), "-2500000.0");  // prometheus_client only rewrites d > 0
  EXPECT_EQ(go_float_string(1e16), "1e+16");
  EXPECT_EQ(go_float_string(HUGE_VAL), "+Inf");
  EXPECT_EQ(go_float_string(-HUGE_VAL), "-Inf");
  EXPECT_EQ(go_float_string(std::nan("")), "NaN");
}

TEST(PrometheusText, Escaping) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help("x\\y\nz\"q"), "x\\\\y\\nz\"q");
}

engine::EngineStats known_stats() {
  engine::EngineStats stats;
  stats.scheduler.num_running = 2;
  stats.scheduler.num_waiting = 1;
  stats.scheduler.kv_cache_usage = 0.25;
  stats.scheduler.prefix_cache_queries = 100;
  stats.scheduler.prefix_cache_hits = 40;
  stats.scheduler.num_preemptions = 3;
  stats.scheduler.prompt_tokens_computed = 60;
  stats.scheduler.generation_tokens = 1234567;
  stats.requests_finished = {{"stop", 5}, {"length", 1}};
  // Small bucket lists keep the literal short; the real lists are checked below.
  stats.request_prompt_tokens = engine::Histogram({1, 10});
  stats.request_generation_tokens = engine::Histogram({1, 10});
  stats.iteration_tokens = engine::Histogram({8});
  stats.engine_step_duration = engine::Histogram({0.25});
  stats.time_to_first_token = engine::Histogram({0.1, 1.0});
  stats.inter_token_latency = engine::Histogram({0.05});
  stats.e2e_request_latency = engine::Histogram({1.5});
  stats.request_queue_time = engine::Histogram({0.3});
  stats.request_prompt_tokens.observe(10);
  stats.request_prompt_tokens.observe(50);
  stats.request_generation_tokens.observe(1);
  stats.iteration_tokens.observe(8);
  stats.iteration_tokens.observe(9);
  stats.engine_step_duration.observe(0.125);
  stats.time_to_first_token.observe(0.05);
  stats.time_to_first_token.observe(0.1);
  stats.time_to_first_token.observe(2.0);
  stats.inter_token_latency.observe(0.01);
  stats.e2e_request_latency.observe(2.5);
  return stats;
}

constexpr const char* kExpected = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 1.0
# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",model_name="qwen",sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="0",model_name="qwen",sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="0",model_name="qwen",sleep_state="discard_all"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.25
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen"} 100.0
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="qwen"} 40.0
# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_created gauge
vllm:prefix_cache_hits_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:external_prefix_cache_queries_total External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="qwen"} 0.0
# HELP vllm:external_prefix_cache_queries_created External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.
# TYPE vllm:external_prefix_cache_queries_created gauge
vllm:external_prefix_cache_queries_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="qwen"} 0.0
# HELP vllm:external_prefix_cache_hits_created External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.
# TYPE vllm:external_prefix_cache_hits_created gauge
vllm:external_prefix_cache_hits_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:mm_cache_queries_total Multi-modal cache queries, in terms of number of queried items.
# TYPE vllm:mm_cache_queries_total counter
vllm:mm_cache_queries_total{engine="0",model_name="qwen"} 0.0
# HELP vllm:mm_cache_queries_created Multi-modal cache queries, in terms of number of queried items.
# TYPE vllm:mm_cache_queries_created gauge
vllm:mm_cache_queries_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:mm_cache_hits_total Multi-modal cache hits, in terms of number of cached items.
# TYPE vllm:mm_cache_hits_total counter
vllm:mm_cache_hits_total{engine="0",model_name="qwen"} 0.0
# HELP vllm:mm_cache_hits_created Multi-modal cache hits, in terms of number of cached items.
# TYPE vllm:mm_cache_hits_created gauge
vllm:mm_cache_hits_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="qwen"} 3.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 100.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="local_compute"} 60.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="local_cache_hit"} 40.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="qwen",source="external_kv_transfer"} 0.0
# HELP vllm:prompt_tokens_by_source_created Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_created gauge
vllm:prompt_tokens_by_source_created{engine="0",model_name="qwen",source="local_compute"} 1.7e+09
vllm:prompt_tokens_by_source_created{engine="0",model_name="qwen",source="local_cache_hit"} 1.7e+09
vllm:prompt_tokens_by_source_created{engine="0",model_name="qwen",source="external_kv_transfer"} 1.7e+09
# HELP vllm:prompt_tokens_cached_total Number of cached prompt tokens (local + external).
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="qwen"} 40.0
# HELP vllm:prompt_tokens_cached_created Number of cached prompt tokens (local + external).
# TYPE vllm:prompt_tokens_cached_created gauge
vllm:prompt_tokens_cached_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} 1.234567e+06
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 5.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen"} 1.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="qwen"} 0.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="qwen"} 0.0
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="qwen"} 0.0
# HELP vllm:request_success_created Count of successfully processed requests.
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="qwen"} 1.7e+09
vllm:request_success_created{engine="0",finished_reason="length",model_name="qwen"} 1.7e+09
vllm:request_success_created{engine="0",finished_reason="abort",model_name="qwen"} 1.7e+09
vllm:request_success_created{engine="0",finished_reason="error",model_name="qwen"} 1.7e+09
vllm:request_success_created{engine="0",finished_reason="repetition",model_name="qwen"} 1.7e+09
# HELP vllm:request_prompt_tokens Number of prefill tokens processed.
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{engine="0",le="1.0",model_name="qwen"} 0.0
vllm:request_prompt_tokens_bucket{engine="0",le="10.0",model_name="qwen"} 1.0
vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="qwen"} 2.0
vllm:request_prompt_tokens_count{engine="0",model_name="qwen"} 2.0
vllm:request_prompt_tokens_sum{engine="0",model_name="qwen"} 60.0
# HELP vllm:request_prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:request_prompt_tokens_created gauge
vllm:request_prompt_tokens_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:request_generation_tokens Number of generation tokens processed.
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_bucket{engine="0",le="1.0",model_name="qwen"} 1.0
vllm:request_generation_tokens_bucket{engine="0",le="10.0",model_name="qwen"} 1.0
vllm:request_generation_tokens_bucket{engine="0",le="+Inf",model_name="qwen"} 1.0
vllm:request_generation_tokens_count{engine="0",model_name="qwen"} 1.0
vllm:request_generation_tokens_sum{engine="0",model_name="qwen"} 1.0
# HELP vllm:request_generation_tokens_created Number of generation tokens processed.
# TYPE vllm:request_generation_tokens_created gauge
vllm:request_generation_tokens_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="8.0",model_name="qwen"} 1.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="qwen"} 2.0
vllm:iteration_tokens_total_count{engine="0",model_name="qwen"} 2.0
vllm:iteration_tokens_total_sum{engine="0",model_name="qwen"} 17.0
# HELP vllm:iteration_tokens_total_created Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total_created gauge
vllm:iteration_tokens_total_created{engine="0",model_name="qwen"} 1.7e+09
# HELP fp4serve:engine_step_duration_seconds Histogram of the wall time of engine steps that ran the model, in seconds.
# TYPE fp4serve:engine_step_duration_seconds histogram
fp4serve:engine_step_duration_seconds_bucket{engine="0",le="0.25",model_name="qwen"} 1.0
fp4serve:engine_step_duration_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 1.0
fp4serve:engine_step_duration_seconds_count{engine="0",model_name="qwen"} 1.0
fp4serve:engine_step_duration_seconds_sum{engine="0",model_name="qwen"} 0.125
# HELP fp4serve:engine_step_duration_seconds_created Histogram of the wall time of engine steps that ran the model, in seconds.
# TYPE fp4serve:engine_step_duration_seconds_created gauge
fp4serve:engine_step_duration_seconds_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 3.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="qwen"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="qwen"} 2.15
# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.05",model_name="qwen"} 1.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 1.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="qwen"} 1.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="qwen"} 0.01
# HELP vllm:inter_token_latency_seconds_created Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds_created gauge
vllm:inter_token_latency_seconds_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.5",model_name="qwen"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 1.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="qwen"} 1.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="qwen"} 2.5
# HELP vllm:e2e_request_latency_seconds_created Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds_created gauge
vllm:e2e_request_latency_seconds_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="qwen"} 0.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 0.0
vllm:request_queue_time_seconds_count{engine="0",model_name="qwen"} 0.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="qwen"} 0.0
# HELP vllm:request_queue_time_seconds_created Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds_created gauge
vllm:request_queue_time_seconds_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="fp8",enable_prefix_caching="True",engine="0"} 1.0
)";

TEST(MetricsExposition, KnownStatsRenderExactly) {
  ExpositionConfig config;
  config.model_name = "qwen";
  config.created_unix_seconds = 1700000000.0;
  config.include_process_metrics = false;
  config.cache_config_info = {{"block_size", "16"}, {"cache_dtype", "fp8"}, {"enable_prefix_caching", "True"}};
  // The per-request phase histograms (inference/prefill/decode time, TPOT, n, max_tokens, longest
  // sequence) sit between request_queue_time and cache_config_info with vLLM's full bucket lists;
  // their text is checked by name and count here, the rest byte for byte.
  const std::string text = render_engine_metrics(known_stats(), config);
  const std::string expected = kExpected;
  const size_t cut_expected = expected.find("# HELP vllm:cache_config_info");
  const size_t phases = text.find("# HELP vllm:request_inference_time_seconds");
  const size_t cut_text = text.find("# HELP vllm:cache_config_info");
  ASSERT_NE(phases, std::string::npos);
  ASSERT_NE(cut_text, std::string::npos);
  EXPECT_EQ(text.substr(0, phases), expected.substr(0, cut_expected));
  EXPECT_EQ(text.substr(cut_text), expected.substr(cut_expected));
  const std::string middle = text.substr(phases, cut_text - phases);
  for (const char* family : {"vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
                             "vllm:request_decode_time_seconds", "vllm:request_time_per_output_token_seconds",
                             "vllm:request_params_n", "vllm:request_params_max_tokens",
                             "vllm:request_max_num_generation_tokens"}) {
    EXPECT_NE(middle.find(std::string("# TYPE ") + family + " histogram\n"), std::string::npos) << family;
    EXPECT_NE(middle.find(std::string(family) + "_count{engine=\"0\",model_name=\"qwen\"} 0.0\n"), std::string::npos)
        << family;
  }
}

// A minimal reader of the text format, enough to check the rules a scraper relies on.
struct Family {
  std::string type;
  bool has_help = false;
};

void check_prometheus_text(const std::string& text) {
  static const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  static const std::regex label_re(R"(^([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\]|\\.)*)\"$)");
  std::map<std::string, Family> families;
  std::set<std::string> series;
  std::string current;
  // Histogram state per series-without-le.
  std::map<std::string, std::pair<double, double>> last_bucket;  // key -> (le, cumulative)
  std::map<std::string, double> inf_count;
  std::istringstream in(text);
  std::string line;
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.back(), '\n');
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      ASSERT_EQ(families.count(name), 0u) << "family declared twice: " << name;
      families[name].has_help = true;
      current = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      ASSERT_EQ(name, current) << "TYPE must follow its HELP";
      ASSERT_TRUE(type == "gauge" || type == "counter" || type == "histogram") << type;
      families[name].type = type;
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, sample_re)) << line;
    const std::string name = m[1];
    const Family& fam = families[current];
    if (fam.type == "histogram") {
      ASSERT_TRUE(name == current + "_bucket" || name == current + "_count" || name == current + "_sum") << line;
    } else {
      ASSERT_EQ(name, current) << line;
    }
    if (fam.type == "counter") {
      ASSERT_EQ(name.substr(name.size() - 6), "_total");
    }
    // Labels: well formed, sorted, unique.
    std::vector<std::string> keys;
    std::string le;
    std::string others;
    std::stringstream labels(m[3].str());
    for (std::string pair; std::getline(labels, pair, ',');) {
      std::smatch lm;
      ASSERT_TRUE(std::regex_match(pair, lm, label_re)) << pair;
      keys.push_back(lm[1]);
      if (lm[1] == "le") le = lm[2];
      else others += pair + ",";
    }
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end())) << line;
    ASSERT_TRUE(series.insert(name + "{" + m[3].str() + "}").second) << "duplicate series " << line;
    const std::string value_text = m[4];
    const double value = value_text == "+Inf" ? HUGE_VAL : std::stod(value_text);
    if (fam.type == "counter") {
      ASSERT_GE(value, 0.0);
    }
    if (name == current + "_bucket") {
      ASSERT_FALSE(le.empty());
      const double bound = le == "+Inf" ? HUGE_VAL : std::stod(le);
      const std::string key = current + "{" + others + "}";
      if (last_bucket.count(key)) {
        ASSERT_GT(bound, last_bucket[key].first) << "le must ascend: " << line;
        ASSERT_GE(value, last_bucket[key].second) << "buckets must be cumulative: " << line;
      }
      last_bucket[key] = {bound, value};
      if (le == "+Inf") inf_count[key] = value;
    }
    if (name == current + "_count") {
      const std::string key = current + "{" + others + "}";
      ASSERT_EQ(inf_count.count(key), 1u) << "no +Inf bucket before " << line;
      ASSERT_EQ(inf_count[key], value) << "+Inf bucket must equal _count: " << line;
    }
  }
  for (const auto& [name, fam] : families) {
    EXPECT_TRUE(fam.has_help) << name;
    EXPECT_FALSE(fam.type.empty()) << name;
  }
}

TEST(MetricsExposition, RealBucketsParseUnderPrometheusRules) {
  engine::EngineStats stats;
  stats.request_prompt_tokens = engine::Histogram(engine::one_two_five_buckets(262144));
  stats.request_generation_tokens = engine::Histogram(engine::one_two_five_buckets(262144));
  for (double v : {0.0005, 0.001, 0.3, 7.0, 5000.0}) {
    stats.time_to_first_token.observe(v);
    stats.inter_token_latency.observe(v);
    stats.e2e_request_latency.observe(v);
    stats.request_queue_time.observe(v);
    stats.iteration_tokens.observe(v * 100);
    stats.engine_step_duration.observe(v);
    stats.request_prompt_tokens.observe(v * 1000);
    stats.request_generation_tokens.observe(v * 10);
  }
  stats.requests_finished = {{"stop", 3}, {"custom", 1}};
  ExpositionConfig config;
  config.model_name = "Qwen/Qwen3.6-35B-A3B \"nvfp4\"";
  config.created_unix_seconds = 1788733924.32;
  config.cache_config_info = {{"block_size", "16"}};
  const std::string text = render_engine_metrics(stats, config);
  check_prometheus_text(text);
  EXPECT_NE(text.find("le=\"2560.0\""), std::string::npos);
  // The step-time buckets: 2^(k/4) s, exact in binary, from 2^-12 to 2^7 s.
  EXPECT_NE(text.find("fp4serve:engine_step_duration_seconds_bucket{engine=\"0\",le=\"0.000244140625\""),
            std::string::npos);
  EXPECT_NE(text.find("fp4serve:engine_step_duration_seconds_bucket{engine=\"0\",le=\"128.0\""), std::string::npos);
  EXPECT_NE(text.find("le=\"200000.0\""), std::string::npos);
  EXPECT_NE(text.find("vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3.6-35B-A3B \\\"nvfp4\\\"\"} 5.0"),
            std::string::npos);
  EXPECT_NE(text.find("finished_reason=\"custom\""), std::string::npos);
  EXPECT_NE(text.find("} 1.78873392432e+09\n"), std::string::npos);
  // vLLM no longer shows the deprecated alias by default.
  EXPECT_EQ(text.find("gpu_cache_usage_perc"), std::string::npos);
}

TEST(MetricsExposition, ProcessMetricsComeFirstAndAreSane) {
  const auto process = read_process_metrics();
  ASSERT_TRUE(process.has_value());
  EXPECT_GT(process->resident_memory_bytes, 1e5);
  EXPECT_GT(process->virtual_memory_bytes, process->resident_memory_bytes);
  EXPECT_GT(process->start_time_seconds, 1.5e9);
  EXPECT_GE(process->cpu_seconds_total, 0.0);
  ExpositionConfig config;
  config.model_name = "m";
  const std::string text = render_engine_metrics(engine::EngineStats{}, config);
  EXPECT_EQ(text.rfind("# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                       "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes ",
                       0),
            0u);
  EXPECT_NE(text.find("\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "), std::string::npos);
  EXPECT_EQ(text.find("_created"), std::string::npos);  // created_unix_seconds < 0 leaves them out
  check_prometheus_text(text);
}

}  // namespace
}  // namespace fp4serve::server::metrics

namespace fp4serve::server::metrics {
namespace {

TEST(MetricsExposition, SpecDecodeCountersOnlyWithSpeculativeDecoding) {
  ExpositionConfig config;
  config.model_name = "qwen";
  config.include_process_metrics = false;
  engine::EngineStats stats;
  EXPECT_EQ(render_engine_metrics(stats, config).find("spec_decode"), std::string::npos);
  engine::SpecDecodeMetrics& sd = stats.scheduler.spec_decode;
  sd.num_speculative_tokens = 2;
  sd.num_drafts = 7;
  sd.num_draft_tokens = 14;
  sd.num_accepted_tokens = 9;
  sd.num_accepted_tokens_per_pos = {6, 3};
  const std::string text = render_engine_metrics(stats, config);
  for (const char* line : {
           "# TYPE vllm:spec_decode_num_drafts_total counter\n",
           "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"qwen\"} 7.0\n",
           "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"qwen\"} 14.0\n",
           "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"qwen\"} 9.0\n",
           "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"qwen\",position=\"0\"} 6.0\n",
           "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"qwen\",position=\"1\"} 3.0\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  EXPECT_EQ(text.find("position=\"2\""), std::string::npos);
}

}  // namespace
}  // namespace fp4serve::server::metrics
