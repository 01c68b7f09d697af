// MTP speculative decoding end to end through the engine on the tiny BF16 model (its mtp.* block:
// tools/reference/make_tiny_mtp.py): with the checkpoint's MTP layer drafting N = 1, 2, 3 tokens,
// every request's tokens equal the run without drafts -- greedy alone and in a batch of 32, seeded
// sampling, after prefix-cache hits and through preemption -- the spec-decode counters add up, and a
// rejected draft leaves no trace in the prefix cache. Unseeded sampling keeps the target
// distribution (a chi-square test over draws restricted to a tiny vocabulary by top_k).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "engine/engine_error.h"
#include "engine/sampling_params.h"
#include "engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

std::shared_ptr<const model::Qwen35MoeModel> mtp_model() {
  static std::shared_ptr<const model::Qwen35MoeModel> m = [] {
    const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
    auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
    auto model = std::make_shared<model::Qwen35MoeModel>(ck);
    model->bind_mtp();
    return std::shared_ptr<const model::Qwen35MoeModel>(model);
  }();
  return m;
}

EngineConfig config_with(int drafts) {
  EngineConfig c = small_engine_config();
  c.mtp = drafts > 0;
  c.num_speculative_tokens = drafts;
  return c;
}

EngineRequest prepared(EngineRequest r) {
  SamplingLimits lim;
  lim.vocab_size = mtp_model()->vocab_size();
  if (auto err = prepare_sampling_params(r.params, lim)) ADD_FAILURE() << err->message;
  return r;
}

// Runs the requests at once and returns each one's tokens, and the engine's stats after.
std::vector<std::vector<std::int32_t>> run_all(const EngineConfig& config, const std::vector<EngineRequest>& requests,
                                               EngineStats* stats = nullptr) {
  Engine engine(mtp_model(), qwen_tokenizer(), config);
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (const auto& r : requests) channels.push_back(engine.submit(prepared(r)));
  std::vector<std::vector<std::int32_t>> out;
  for (auto& ch : channels) {
    Finished f = collect(*ch);
    EXPECT_FALSE(f.error) << *f.error;
    out.push_back(f.tokens[0]);
  }
  if (stats) *stats = engine.stats();
  expect_no_leaks(engine);
  return out;
}

std::vector<EngineRequest> greedy_batch(int n, int max_tokens, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<EngineRequest> rs;
  for (int i = 0; i < n; ++i) {
    rs.push_back(greedy_request("r" + std::to_string(i), random_prompt(rng, 3 + (i * 7) % 40), max_tokens));
  }
  return rs;
}

class MtpGreedy : public ::testing::TestWithParam<int> {};

TEST_P(MtpGreedy, TokensEqualTheRunWithoutDraftsAloneAndInABatchOf32) {
  const int n = GetParam();
  const auto batch = greedy_batch(32, 24, 7);
  const auto plain = run_all(config_with(0), batch);
  EngineStats st;
  EXPECT_EQ(run_all(config_with(n), batch, &st), plain);
  const SpecDecodeMetrics& sd = st.scheduler.spec_decode;
  EXPECT_EQ(sd.num_speculative_tokens, n);
  EXPECT_GT(sd.num_drafts, 0);
  EXPECT_LE(sd.num_draft_tokens, sd.num_drafts * n);
  EXPECT_LE(sd.num_accepted_tokens, sd.num_draft_tokens);
  std::int64_t per_pos = 0;
  for (int p = 0; p < n; ++p) per_pos += sd.num_accepted_tokens_per_pos[static_cast<std::size_t>(p)];
  EXPECT_EQ(per_pos, sd.num_accepted_tokens);
  // The tiny model's MTP is trained on its own samples (make_tiny_mtp.py): most greedy drafts hold.
  EXPECT_GT(sd.num_accepted_tokens * 2, sd.num_draft_tokens);
  std::printf("N = %d: %lld drafts, %lld draft tokens, %lld accepted\n", n, static_cast<long long>(sd.num_drafts),
              static_cast<long long>(sd.num_draft_tokens), static_cast<long long>(sd.num_accepted_tokens));
  // Alone: one request, its own steps.
  const std::vector<EngineRequest> one = {batch[5]};
  EXPECT_EQ(run_all(config_with(n), one), run_all(config_with(0), one));
}

TEST_P(MtpGreedy, TokensEqualThroughPrefixHitsAndPreemption) {
  const int n = GetParam();
  std::mt19937 rng(11);
  const std::vector<std::int32_t> shared = random_prompt(rng, 40);
  std::vector<EngineRequest> rs;
  for (int i = 0; i < 12; ++i) {
    std::vector<std::int32_t> p = shared;
    const auto tail = random_prompt(rng, 1 + i % 5);
    p.insert(p.end(), tail.begin(), tail.end());
    rs.push_back(greedy_request("p" + std::to_string(i), p, 40));
  }
  // Few KV blocks: 12 requests of ~85 tokens cannot all run; the newest are preempted and resume.
  EngineConfig tight_plain = config_with(0), tight = config_with(n);
  tight_plain.max_model_len = tight.max_model_len = 128;
  tight_plain.num_kv_blocks_override = tight.num_kv_blocks_override = 16;
  EngineStats st_plain, st;
  const auto plain = run_all(tight_plain, rs, &st_plain);
  EXPECT_EQ(run_all(tight, rs, &st), plain);
  EXPECT_GT(st.scheduler.num_preemptions, 0);
  EXPECT_GT(st.scheduler.prefix_cache_hits, 0);
}

INSTANTIATE_TEST_SUITE_P(Drafts, MtpGreedy, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "N" + std::to_string(info.param); });

TEST(MtpSampling, SeededRequestsGetTheTokensOfTheRunWithoutDrafts) {
  std::mt19937 rng(3);
  std::vector<EngineRequest> rs;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r = greedy_request("s" + std::to_string(i), random_prompt(rng, 5 + i), 20);
    r.params.temperature = 0.8;
    r.params.top_k = 5;
    r.params.seed = 100 + i;
    rs.push_back(r);
  }
  EXPECT_EQ(run_all(config_with(3), rs), run_all(config_with(0), rs));
}

// n > 1: the children forked from the prompt (their partial block copied after the MTP wrote its
// rows into it) decode with drafts too and keep their seeded tokens.
TEST(MtpSampling, ForkedChildrenOfAnNRequestKeepTheirTokens) {
  std::mt19937 rng(5);
  EngineRequest r = greedy_request("n", random_prompt(rng, 21), 24);
  r.params.n = 3;
  r.params.temperature = 0.7;
  r.params.seed = 9;
  auto run = [&](int drafts) {
    Engine engine(mtp_model(), qwen_tokenizer(), config_with(drafts));
    Finished f = collect(*engine.submit(prepared(r)), 3);
    EXPECT_FALSE(f.error);
    return std::make_pair(f.tokens, engine.stats().scheduler.spec_decode.num_accepted_tokens);
  };
  const auto plain = run(0);
  const auto mtp = run(2);
  EXPECT_EQ(mtp.first, plain.first);
  EXPECT_GT(mtp.second, 0);
}

// Unseeded requests draw from the engine's generator, so their streams differ with drafts; their
// distribution must not. The third output token comes from a verify step's second row when the
// draft for the second was accepted, else from the next step; sampled from top_k = 3 of the target's
// row, its marginal is sum_{t0, t1} p(t0) p(t1 | t0) p(t2 | t0, t1), from the model's own logits.
TEST(MtpSampling, UnseededDrawsKeepTheTargetDistribution) {
  const std::vector<std::int32_t> prompt = {17, 230, 41, 9, 388};
  constexpr int kDraws = 600;
  constexpr int kTopK = 3;
  auto request = [&](int i) {
    EngineRequest r = greedy_request("u" + std::to_string(i), prompt, 3);
    r.params.temperature = 1.0;
    r.params.top_k = kTopK;
    // Distinct salts: identical concurrent prompts would otherwise be forked from one prefill
    // (prompt_twins.h), and a fork child decodes its second token without drafts.
    r.cache_salt_hash = static_cast<std::uint64_t>(i) + 1;
    return r;
  };
  std::vector<EngineRequest> rs;
  for (int i = 0; i < kDraws; ++i) rs.push_back(request(i));
  EngineConfig c = config_with(2);
  c.seed = 12345;
  EngineStats st;
  const auto got = run_all(c, rs, &st);
  EXPECT_GT(st.scheduler.spec_decode.num_drafts, 0);
  // Every request verifies one draft for its third token after its first decode step.
  EXPECT_GE(st.scheduler.spec_decode.num_drafts, kDraws * 9 / 10);
  EXPECT_GT(st.scheduler.spec_decode.num_accepted_tokens, kDraws / 10) << "few drafts accepted: little covered";

  // Expected: top-3 softmax at temperature 1 of the model's rows (fp32 logits as the sampler sees them).
  const model::Qwen35MoeModel& m = *mtp_model();
  auto top_probs = [&](const std::vector<std::int32_t>& ids) {
    auto st_seq = m.new_sequence(64);
    const std::vector<float> lg = m.forward({{&st_seq, ids, false}});
    std::vector<std::pair<float, int>> v;
    for (int i = 0; i < static_cast<int>(lg.size()); ++i) v.push_back({lg[static_cast<std::size_t>(i)], i});
    std::partial_sort(v.begin(), v.begin() + kTopK, v.end(), [](auto& a, auto& b) { return a.first > b.first; });
    std::map<int, double> p;
    double z = 0;
    for (int k = 0; k < kTopK; ++k) z += std::exp(v[static_cast<std::size_t>(k)].first - v[0].first);
    for (int k = 0; k < kTopK; ++k)
      p[v[static_cast<std::size_t>(k)].second] = std::exp(v[static_cast<std::size_t>(k)].first - v[0].first) / z;
    return p;
  };
  std::map<int, double> expected;  // token at output position 2
  for (const auto& [t0, p0] : top_probs(prompt)) {
    std::vector<std::int32_t> ids = prompt;
    ids.push_back(t0);
    for (const auto& [t1, p1] : top_probs(ids)) {
      std::vector<std::int32_t> ids2 = ids;
      ids2.push_back(t1);
      for (const auto& [t2, p2] : top_probs(ids2)) expected[t2] += p0 * p1 * p2;
    }
  }
  std::map<int, int> seen;
  for (const auto& toks : got) {
    ASSERT_EQ(toks.size(), 3u);
    ++seen[toks[2]];
  }
  double chi2 = 0;
  int cells = 0;
  for (const auto& [tok, p] : expected) {
    const double e = p * kDraws;
    if (e < 5) continue;  // chi-square needs expected counts of 5 or more
    const double o = seen.count(tok) ? seen[tok] : 0;
    chi2 += (o - e) * (o - e) / e;
    ++cells;
  }
  int outside = 0;
  for (const auto& [tok, count] : seen)
    if (!expected.count(tok)) outside += count;
  EXPECT_EQ(outside, 0) << "a token outside every top-3 path was emitted";
  ASSERT_GE(cells, 2);
  // 99.99th percentiles of chi-square by degrees of freedom (cells - 1): a false alarm once in
  // 10,000 runs (the unseeded draws depend on how the engine thread batches the requests).
  constexpr double kChi2_9999[] = {0,     15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88, 31.83, 33.72,
                                   35.56, 37.37, 39.13, 40.87, 42.58, 44.26, 45.92, 47.57, 49.19, 50.80,
                                   52.39, 53.96, 55.52, 57.07, 58.61, 60.14, 61.66};
  std::printf("chi-square %.2f over %d cells (%d draws, %lld drafts accepted of %lld)\n", chi2, cells, kDraws,
              static_cast<long long>(st.scheduler.spec_decode.num_accepted_tokens),
              static_cast<long long>(st.scheduler.spec_decode.num_draft_tokens));
  EXPECT_LT(chi2, kChi2_9999[cells - 1]) << "cells " << cells;
}

// A rejected draft leaves no trace: after runs with and without MTP, a follow-up request that
// extends each finished conversation gets the same cache hits and the same tokens.
TEST(MtpPrefixCache, RejectedDraftsLeaveNoTraceInTheCache) {
  const auto batch = greedy_batch(4, 40, 21);
  auto follow_up = [&](int drafts) {
    Engine engine(mtp_model(), qwen_tokenizer(), config_with(drafts));
    std::vector<std::vector<std::int32_t>> first;
    for (const auto& r : batch) first.push_back(collect(*engine.submit(prepared(r))).tokens[0]);
    std::vector<std::pair<int, std::vector<std::int32_t>>> out;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      std::vector<std::int32_t> p = batch[i].prompt_token_ids;
      p.insert(p.end(), first[i].begin(), first[i].end());
      const Finished f = collect(*engine.submit(prepared(greedy_request("f" + std::to_string(i), p, 16))));
      out.push_back({f.num_cached_tokens, f.tokens[0]});
    }
    return out;
  };
  const auto plain = follow_up(0);
  EXPECT_EQ(follow_up(3), plain);
  for (const auto& [cached, tokens] : plain) EXPECT_GT(cached, 0);
}

TEST(MtpConfig, AModelWithoutItsMtpHeadIsRefusedWithTheReason) {
  EngineConfig c = config_with(2);
  try {
    Engine engine(tiny_model("tiny-fp8"), qwen_tokenizer(), c);
    FAIL() << "expected a refusal";
  } catch (const EngineConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MTP speculative decoding is unavailable"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no MTP layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fp4serve::engine
