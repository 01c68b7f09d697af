// The periodic stats log line (vLLM LoggingStatLogger.log) from two EngineStats snapshots.
#include "server/metrics/stats_log_line.h"

#include <gtest/gtest.h>

namespace fp4serve::server::metrics {
namespace {

engine::EngineStats snapshot(std::int64_t computed, std::int64_t generated, std::int64_t preemptions,
                             std::int64_t queries, std::int64_t hits, std::int64_t finished) {
  engine::EngineStats s;
  s.scheduler.prompt_tokens_computed = computed;
  s.scheduler.generation_tokens = generated;
  s.scheduler.num_preemptions = preemptions;
  s.scheduler.prefix_cache_queries = queries;
  s.scheduler.prefix_cache_hits = hits;
  s.scheduler.num_running = 1;
  s.scheduler.num_waiting = 14;
  s.scheduler.kv_cache_usage = 0.765;
  s.requests_finished = {{"stop", finished}};
  return s;
}

TEST(StatsLogLine, MatchesVllmFormat) {
  StatsLogger logger;
  const auto a = snapshot(0, 0, 0, 0, 0, 0);
  const auto b = snapshot(0, 54, 0, 1000, 920, 1);
  const auto line = logger.log(a, b, 10.0);
  // The line from intel/llm-scaler#391 quoted in docs/vllm-surface.md §3.2.
  EXPECT_EQ(line.text,
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 5.4 tokens/s, Running: 1 "
            "reqs, Waiting: 14 reqs, GPU KV cache usage: 76.5%, Prefix cache hit rate: 92.0%");
  EXPECT_FALSE(line.idle);
}

TEST(StatsLogLine, PreemptionsOnlyWhenThereWereSome) {
  StatsLogger logger(1);
  const auto a = snapshot(100, 10, 2, 0, 0, 0);
  const auto b = snapshot(300, 30, 5, 0, 0, 0);
  EXPECT_EQ(logger.log(a, b, 4.0).text,
            "Engine 001: Avg prompt throughput: 50.0 tokens/s, Avg generation throughput: 5.0 tokens/s, Running: 1 "
            "reqs, Waiting: 14 reqs, Preemptions: 3, GPU KV cache usage: 76.5%, Prefix cache hit rate: 0.0%");
  // Same cumulative count next interval: no preemptions in it, no field.
  EXPECT_EQ(logger.log(b, b, 4.0).text.find("Preemptions"), std::string::npos);
}

TEST(StatsLogLine, IdleAfterTwoQuietIntervals) {
  StatsLogger logger;
  const auto a = snapshot(0, 0, 0, 0, 0, 0);
  const auto b = snapshot(0, 10, 0, 0, 0, 0);
  EXPECT_FALSE(logger.log(a, b, 10.0).idle);
  EXPECT_FALSE(logger.log(b, b, 10.0).idle);  // previous interval still had throughput
  EXPECT_TRUE(logger.log(b, b, 10.0).idle);
  EXPECT_EQ(logger.log(b, b, 0.0).text.find("Avg prompt throughput: 0.0 tokens/s"), 12u);  // no division by zero
}

TEST(StatsLogLine, HitRateIsOverRecentRequestsNotSinceStart) {
  PrefixCacheHitRateWindow window(1000);
  EXPECT_EQ(window.hit_rate(), 0.0);
  window.observe(600, 1000, 1000);
  window.observe(0, 5000, 0);  // no requests: ignored, as in vLLM
  EXPECT_DOUBLE_EQ(window.hit_rate(), 1.0);
  window.observe(600, 1000, 0);  // 1200 requests > 1000: the oldest observation drops out
  EXPECT_DOUBLE_EQ(window.hit_rate(), 0.0);
  window.observe(5000, 10, 5);  // the newest is kept even when it alone exceeds the window
  EXPECT_DOUBLE_EQ(window.hit_rate(), 0.5);
}

TEST(StatsLogLine, RequestsFinishedBetweenSnapshots) {
  engine::EngineStats a, b;
  a.requests_finished = {{"stop", 2}};
  b.requests_finished = {{"stop", 5}, {"length", 1}};
  EXPECT_EQ(requests_finished_between(a, b), 4);
}

}  // namespace
}  // namespace fp4serve::server::metrics

namespace fp4serve::server::metrics {
namespace {

TEST(StatsLogLine, SpecDecodingLineAsVllmsWhenDraftsWereVerified) {
  engine::EngineStats a = snapshot(0, 0, 0, 0, 0, 0), b = snapshot(0, 90, 0, 0, 0, 0);
  a.scheduler.spec_decode.num_speculative_tokens = b.scheduler.spec_decode.num_speculative_tokens = 3;
  StatsLogger logger;
  EXPECT_EQ(logger.log(a, b, 10.0).spec_decode, "") << "no drafts in the interval: no line";
  a.scheduler.spec_decode.num_drafts = 10;
  a.scheduler.spec_decode.num_draft_tokens = 30;
  a.scheduler.spec_decode.num_accepted_tokens = 5;
  a.scheduler.spec_decode.num_accepted_tokens_per_pos = {3, 2};
  b.scheduler.spec_decode = a.scheduler.spec_decode;
  b.scheduler.spec_decode.num_drafts += 20;
  b.scheduler.spec_decode.num_draft_tokens += 60;
  b.scheduler.spec_decode.num_accepted_tokens += 31;
  b.scheduler.spec_decode.num_accepted_tokens_per_pos = {3 + 16, 2 + 10, 5};
  // vllm/v1/spec_decode/metrics.py SpecDecodingLogging.log, over the interval only.
  EXPECT_EQ(logger.log(a, b, 10.0).spec_decode,
            "SpecDecoding metrics: Mean acceptance length: 2.55, Accepted throughput: 3.10 tokens/s, Drafted "
            "throughput: 6.00 tokens/s, Accepted: 31 tokens, Drafted: 60 tokens, Per-position acceptance rate: "
            "0.800, 0.500, 0.250, Avg Draft acceptance rate: 51.7%");
}

}  // namespace
}  // namespace fp4serve::server::metrics
