// The CPU sampling op as a whole (sample_rows, CpuBackend::sample): what the engine's sampler tests
// cannot see from one row at a time. A row's result is bit-identical whatever the other rows, their
// order and the thread count; unseeded rows take the engine generator's draws in row order; the
// logits come back unchanged; bad calls are refused before anything is touched; and once warm, a
// call allocates nothing (this binary counts operator new: unit/allocation_counter.h).
#include "kernels/cpu/sampling_cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "unit/allocation_counter.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cpu {
namespace {

using testing::random_logits;

constexpr int64_t kVocab = 1000;
constexpr int64_t kValid = 990;

// A batch of rows covering every stage: greedy and random, seeded and not, processors, logprobs.
struct Batch {
  std::vector<SamplingOptions> options;
  std::vector<std::vector<int32_t>> prompts, outputs;
  std::vector<std::vector<float>> logits;  // one row each, kVocab floats
};

Batch make_batch() {
  Batch b;
  auto add = [&](SamplingOptions o, std::vector<int32_t> prompt, std::vector<int32_t> output, uint32_t seed) {
    b.options.push_back(std::move(o));
    b.prompts.push_back(std::move(prompt));
    b.outputs.push_back(std::move(output));
    std::vector<float> row = random_logits(kVocab, seed, 0.4f);  // flat: many plausible tokens
    for (int64_t i = kValid; i < kVocab; ++i) row[static_cast<std::size_t>(i)] = 60.0f;  // padding
    b.logits.push_back(std::move(row));
  };
  SamplingOptions seeded_top_p;
  seeded_top_p.seed = 42;
  seeded_top_p.top_p = 0.9;
  seeded_top_p.logprobs = 5;
  add(seeded_top_p, {1, 2, 3}, {7, 7, 8}, 1);

  SamplingOptions greedy_processed;
  greedy_processed.temperature = 0.0;
  greedy_processed.repetition_penalty = 1.3;
  greedy_processed.frequency_penalty = 0.4;
  greedy_processed.presence_penalty = 0.2;
  greedy_processed.logit_bias = {{17, 0.8f}, {5, -3.0f}};
  greedy_processed.bad_words = {{9}, {7, 8, 4}};
  greedy_processed.logprobs = -1;
  add(greedy_processed, {4, 5, 6, 17}, {7, 8}, 2);

  SamplingOptions seeded_top_k;
  seeded_top_k.seed = 7;
  seeded_top_k.temperature = 0.7;
  seeded_top_k.top_k = 40;
  seeded_top_k.min_p = 0.05;
  seeded_top_k.min_tokens = 5;
  seeded_top_k.min_tokens_stop_ids = {3, 11, 12};
  add(seeded_top_k, {9}, {1, 2}, 3);

  SamplingOptions unseeded;
  unseeded.top_k = 50;
  unseeded.logprobs = 2;
  add(unseeded, {1}, {}, 4);

  SamplingOptions seeded_full;
  seeded_full.seed = 1234567;
  seeded_full.temperature = 1.4;
  seeded_full.logprobs = 0;
  add(seeded_full, {}, std::vector<int32_t>(30, 2), 5);

  add(unseeded, {2}, {3}, 6);
  add(greedy_processed, {}, {}, 7);
  return b;
}

std::vector<std::size_t> in_order(std::size_t n) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// The op's rows for rows `order` of the batch, with room for their logprobs in `top` (by batch row).
std::vector<SampleRow> rows_of(const Batch& b, const std::vector<std::size_t>& order, int64_t valid,
                               std::vector<std::vector<TokenLogprob>>& top) {
  top.resize(b.options.size());
  std::vector<SampleRow> rows;
  for (std::size_t k : order) {
    top[k].assign(static_cast<std::size_t>(b.options[k].top_entries(valid)), TokenLogprob{});
    rows.push_back(SampleRow{&b.options[k], b.prompts[k], b.outputs[k], top[k]});
  }
  return rows;
}

// Rows `order` of the batch's logits, `stride` floats apart (the gaps hold -7).
std::vector<float> logits_of(const Batch& b, const std::vector<std::size_t>& order, int64_t stride = kVocab) {
  std::vector<float> logits(order.size() * static_cast<std::size_t>(stride), -7.0f);
  for (std::size_t i = 0; i < order.size(); ++i)
    std::copy(b.logits[order[i]].begin(), b.logits[order[i]].end(),
              logits.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(stride)));
  return logits;
}

// Runs rows `order` of the batch in that order; results back in batch order.
struct Outcome {
  std::vector<SampleResult> results;
  std::vector<std::vector<TokenLogprob>> top;
  uint64_t draws_after = 0;
};

Outcome sample_batch(const Batch& b, const std::vector<std::size_t>& order, int threads, uint64_t draws = 0) {
  const std::size_t n = order.size();
  std::vector<float> logits = logits_of(b, order);
  Outcome r;
  const std::vector<SampleRow> rows = rows_of(b, order, kValid, r.top);
  std::vector<SampleResult> out(n);
  SamplingConfig config{kVocab, kValid, 99, &draws, threads};
  sample_rows(logits.data(), kVocab, rows, config, out);
  r.results.resize(b.options.size());
  for (std::size_t i = 0; i < n; ++i) r.results[order[i]] = out[i];
  r.draws_after = draws;
  return r;
}

void expect_same(const Outcome& a, const Outcome& b, std::size_t row, const std::string& what) {
  const SampleResult &x = a.results[row], &y = b.results[row];
  EXPECT_EQ(x.token, y.token) << what << " row " << row;
  EXPECT_EQ(x.has_logprobs, y.has_logprobs) << what << " row " << row;
  EXPECT_EQ(std::bit_cast<uint32_t>(x.logprob), std::bit_cast<uint32_t>(y.logprob)) << what << " row " << row;
  EXPECT_EQ(x.rank, y.rank) << what << " row " << row;
  ASSERT_EQ(x.num_top, y.num_top) << what << " row " << row;
  for (int64_t i = 0; i < x.num_top; ++i) {
    const auto j = static_cast<std::size_t>(i);
    EXPECT_EQ(a.top[row][j].token, b.top[row][j].token) << what << " row " << row << " top " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(a.top[row][j].logprob), std::bit_cast<uint32_t>(b.top[row][j].logprob))
        << what << " row " << row << " top " << i;
  }
}

bool seeded_or_greedy(const SamplingOptions& o) { return o.greedy() || o.seed.has_value(); }

TEST(SamplingOp, RowsAreIndependentOfTheBatchItsOrderAndThreads) {
  const Batch b = make_batch();
  const std::size_t n = b.options.size();
  const std::vector<std::size_t> forward = in_order(n);
  const Outcome reference = sample_batch(b, forward, 1);
  for (std::size_t k = 0; k < n; ++k) {
    if (!seeded_or_greedy(b.options[k])) continue;
    expect_same(sample_batch(b, {k}, 1), reference, k, "alone");
  }
  const std::vector<std::size_t> reversed(forward.rbegin(), forward.rend());
  const std::vector<std::size_t> shuffled{3, 0, 6, 2, 5, 1, 4};
  for (int threads : {1, 2, 3, 8}) {
    for (const std::vector<std::size_t>* order : {&forward, &reversed, &shuffled}) {
      const Outcome r = sample_batch(b, *order, threads);
      EXPECT_EQ(r.draws_after, 2u) << "two unseeded random rows, one draw each";
      for (std::size_t k = 0; k < n; ++k) {
        if (seeded_or_greedy(b.options[k])) expect_same(r, reference, k, "threads " + std::to_string(threads));
      }
      // In batch order, the unseeded rows get the same draws as well.
      if (order == &forward) {
        for (std::size_t k = 0; k < n; ++k) expect_same(r, reference, k, "in order");
      }
    }
  }
  // Padding ids are never sampled and the logprobs never name them.
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_LT(reference.results[k].token, kValid) << k;
    for (int64_t i = 0; i < reference.results[k].num_top; ++i)
      EXPECT_LT(reference.top[k][static_cast<std::size_t>(i)].token, kValid);
  }
  EXPECT_EQ(reference.results[1].num_top, kValid);  // logprobs -1: the valid vocabulary
  EXPECT_FALSE(reference.results[2].has_logprobs);
  EXPECT_TRUE(reference.results[4].has_logprobs);
  EXPECT_EQ(reference.results[4].num_top, 0);
}

TEST(SamplingOp, UnseededRowsTakeTheEngineDrawsInRowOrder) {
  // The j-th unseeded random row of a call gets draw base + j: the same token as that row alone
  // with the counter at base + j.
  Batch b;
  SamplingOptions unseeded;  // full vocabulary, temperature 1
  for (uint32_t k = 0; k < 5; ++k) {
    b.options.push_back(unseeded);
    b.prompts.emplace_back();
    b.outputs.emplace_back();
    b.logits.push_back(random_logits(kVocab, 50 + k, 0.2f));
  }
  SamplingOptions greedy;
  greedy.temperature = 0.0;
  b.options.insert(b.options.begin() + 2, greedy);  // takes no draw
  b.prompts.emplace_back();
  b.outputs.emplace_back();
  b.logits.insert(b.logits.begin() + 2, random_logits(kVocab, 60, 0.2f));
  const std::vector<std::size_t> order = in_order(b.options.size());
  const Outcome all = sample_batch(b, order, 3, 1000);
  EXPECT_EQ(all.draws_after, 1005u);
  uint64_t next = 1000;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Outcome alone = sample_batch(b, {k}, 1, next);
    expect_same(alone, all, k, "draw " + std::to_string(next));
    if (!b.options[k].greedy()) ++next;
  }
}

TEST(SamplingOp, LogitsComeBackUnchanged) {
  const Batch b = make_batch();
  const std::size_t n = b.options.size();
  std::vector<float> logits = logits_of(b, in_order(n));
  const std::vector<float> before = logits;
  std::vector<std::vector<TokenLogprob>> top;
  const std::vector<SampleRow> rows = rows_of(b, in_order(n), kValid, top);
  std::vector<SampleResult> out(n);
  uint64_t draws = 0;
  sample_rows(logits.data(), kVocab, rows, SamplingConfig{kVocab, kValid, 1, &draws, 4}, out);
  ASSERT_EQ(std::memcmp(logits.data(), before.data(), logits.size() * sizeof(float)), 0);
}

TEST(SamplingOp, BackendViewsMayBeRowStrided) {
  const Batch b = make_batch();
  const std::size_t n = b.options.size();
  constexpr int64_t kStride = kVocab + 24;
  std::vector<float> strided = logits_of(b, in_order(n), kStride);
  TensorView view = TensorView::contiguous(strided.data(), DType::kF32, {static_cast<int64_t>(n), kVocab});
  view.stride[0] = kStride;
  Outcome r;
  const std::vector<SampleRow> rows = rows_of(b, in_order(n), kValid, r.top);
  r.results.resize(n);
  uint64_t draws = 0;
  CpuBackend backend(Isa::kScalar);
  backend.sample(view, rows, SamplingConfig{kVocab, kValid, 99, &draws, 2}, r.results);
  const Outcome contiguous = sample_batch(b, in_order(n), 2);
  for (std::size_t k = 0; k < n; ++k) expect_same(r, contiguous, k, "strided");
  for (std::size_t k = 0; k < n; ++k)
    for (int64_t i = kVocab; i < kStride; ++i) ASSERT_EQ(strided[k * kStride + static_cast<std::size_t>(i)], -7.0f);
}

TEST(SamplingOp, RefusesBadCallsBeforeTouchingAnything) {
  const Batch b = make_batch();
  std::vector<float> logits = b.logits[0];
  logits.insert(logits.end(), b.logits[1].begin(), b.logits[1].end());
  const std::vector<float> before = logits;
  std::vector<TokenLogprob> top0(5), top1(kValid);
  std::vector<SampleRow> rows{{&b.options[0], b.prompts[0], b.outputs[0], top0},
                              {&b.options[1], b.prompts[1], b.outputs[1], top1}};
  std::vector<SampleResult> out(2);
  uint64_t draws = 3;
  const SamplingConfig good{kVocab, kValid, 1, &draws, 2};
  auto expect_refused = [&](std::vector<SampleRow> r, SamplingConfig c, std::size_t results) {
    std::vector<SampleResult> o(results);
    EXPECT_THROW(sample_rows(logits.data(), kVocab, r, c, o), std::invalid_argument);
    for (const SampleResult& x : o) EXPECT_EQ(x.token, -1);
  };
  auto no_options = rows;
  no_options[1].options = nullptr;
  expect_refused(no_options, good, 2);
  auto small_top = rows;
  small_top[1].top = std::span<TokenLogprob>(top1).first(kValid - 1);
  expect_refused(small_top, good, 2);
  SamplingOptions unseeded;
  auto no_counter = rows;
  no_counter[0].options = &unseeded;
  SamplingConfig without_counter = good;
  without_counter.engine_draws = nullptr;
  expect_refused(no_counter, without_counter, 2);
  SamplingConfig bad_vocab = good;
  bad_vocab.valid_vocab_size = kVocab + 1;
  expect_refused(rows, bad_vocab, 2);
  expect_refused(rows, good, 1);
  EXPECT_EQ(draws, 3u);
  EXPECT_EQ(logits, before);
  sample_rows(logits.data(), kVocab, rows, good, out);  // the same rows, whole
  EXPECT_EQ(out[1].num_top, kValid);
}

TEST(SamplingOp, AllocatesNothingOnceWarm) {
  // Qwen3.6's row length, a decode batch of every kind of row, on several threads.
  constexpr int64_t kQwenVocab = 248320, kQwenValid = 248077;
  const Batch small = make_batch();
  const std::size_t n = small.options.size();
  std::vector<float> logits(n * kQwenVocab);
  for (std::size_t k = 0; k < n; ++k) {
    const std::vector<float> row = random_logits(kQwenVocab, 300 + static_cast<uint32_t>(k), 1.5f);
    std::copy(row.begin(), row.end(), logits.begin() + static_cast<std::ptrdiff_t>(k * kQwenVocab));
  }
  std::vector<std::vector<TokenLogprob>> top;
  const std::vector<SampleRow> rows = rows_of(small, in_order(n), kQwenValid, top);
  std::vector<SampleResult> out(n);
  uint64_t draws = 0;
  const SamplingConfig config{kQwenVocab, kQwenValid, 5, &draws, 4};
  sample_rows(logits.data(), kQwenVocab, rows, config, out);  // warm-up: every thread reserves once
  g_allocations = 0;
  g_counting = true;
  for (int step = 0; step < 8; ++step) sample_rows(logits.data(), kQwenVocab, rows, config, out);
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0) << "operator new calls across 8 warm calls";
  EXPECT_EQ(draws, 9u * 2u);
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
