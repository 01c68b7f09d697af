// The host half of CUDA sampling (kernels/cuda/sampling_pack.h): the packed edits and masks give
// exactly the CPU processors' row, the uniforms and the engine counter are the CPU op's, and the
// logprob modes, offsets and results land where the kernel and the caller expect them.
#if defined(FP4SERVE_HAVE_CUDA)

#include "kernels/cuda/sampling_pack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/cpu/sampling_processors.h"
#include "kernels/cpu/sampling_rng.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cuda {
namespace {

constexpr int64_t kVocab = 640;
constexpr int64_t kValid = 600;

struct Batch {
  std::vector<SamplingOptions> options;
  std::vector<std::vector<int32_t>> prompts, outputs, bitmasks;
  std::vector<std::vector<TokenLogprob>> tops;
  std::vector<SampleRow> rows;

  void add(SamplingOptions o, std::vector<int32_t> prompt, std::vector<int32_t> output,
           std::vector<int32_t> bitmask = {}) {
    options.push_back(std::move(o));
    prompts.push_back(std::move(prompt));
    outputs.push_back(std::move(output));
    bitmasks.push_back(std::move(bitmask));
  }
  // Rows pointing into the batch (call once everything is added).
  std::span<const SampleRow> make_rows() {
    tops.resize(options.size());
    rows.clear();
    for (std::size_t k = 0; k < options.size(); ++k) {
      tops[k].assign(static_cast<std::size_t>(options[k].top_entries(kValid)), TokenLogprob{});
      rows.push_back(SampleRow{&options[k], prompts[k], outputs[k], tops[k], bitmasks[k]});
    }
    return rows;
  }
};

// A grammar bitmask over the whole logits row allowing roughly every other token, and `also`.
std::vector<int32_t> grammar(uint32_t seed, std::vector<int32_t> also) {
  std::vector<int32_t> words(static_cast<std::size_t>((kVocab + 31) / 32));
  uint32_t x = seed;
  for (int32_t& w : words) {
    x = x * 1664525u + 1013904223u;
    w = static_cast<int32_t>(x ^ 0x55555555u);
  }
  for (int32_t id : also) words[static_cast<std::size_t>(id) / 32] |= static_cast<int32_t>(1u << (id % 32));
  return words;
}

Batch make_batch() {
  Batch b;
  SamplingOptions processed;  // every processor at once, greedy
  processed.temperature = 0.0;
  processed.repetition_penalty = 1.3;
  processed.frequency_penalty = 0.4;
  processed.presence_penalty = 0.2;
  processed.logit_bias = {{17, 0.8f}, {5, -3.0f}, {17, 0.25f}, {700, 1.0f}, {598, 2.0f}};
  processed.bad_words = {{9}, {7, 8, 4}, {5}};
  processed.min_tokens = 4;
  processed.min_tokens_stop_ids = {3, 11, 620};
  processed.logprobs = 5;
  b.add(processed, {4, 5, 6, 17, 17, 610}, {7, 8, 5, 8});

  SamplingOptions masked = processed;  // the same under a grammar and allowed ids, random, seeded
  masked.temperature = 0.8;
  masked.seed = 11;
  masked.allowed_token_ids = {2, 5, 17, 40, 300, 599};
  masked.logprobs.reset();
  masked.logprob_token_ids = {17, 5, 630, 17};
  b.add(masked, {4, 5, 40}, {7, 8}, grammar(3, {40}));

  SamplingOptions forced;  // a spent thinking budget forces "</think>" = 61 over a grammar
  forced.temperature = 0.0;
  forced.reasoning_budget.budget = 1;
  forced.reasoning_budget.start_ids = {60};
  forced.reasoning_budget.end_ids = {61};
  summarize_prompt(forced.reasoning_budget, std::vector<int32_t>{4, 60});
  forced.logprobs = -1;
  std::vector<int32_t> no_61 = grammar(5, {});
  no_61[61 / 32] &= ~static_cast<int32_t>(1u << (61 % 32));
  b.add(forced, {4, 60}, {9}, no_61);

  SamplingOptions unseeded;
  unseeded.top_k = 40;
  unseeded.top_p = 0.9;
  unseeded.min_p = 0.05;
  b.add(unseeded, {1}, {});
  SamplingOptions wide = unseeded;
  wide.top_k = kValid;  // the whole vocabulary: off
  wide.logprobs = 0;
  b.add(wide, {}, {3});
  return b;
}

// The CPU processors' row (cpu/sampling_cpu.cpp sample_row's stages) for row k.
std::vector<float> cpu_processed(const Batch& b, std::size_t k, const std::vector<float>& raw) {
  std::vector<float> row(raw.begin(), raw.begin() + kValid);
  const SamplingOptions& o = b.options[k];
  cpu::LogitsEditLog log;
  cpu::PenaltyScratch penalties;
  if (!b.bitmasks[k].empty()) cpu::apply_token_bitmask(row, b.bitmasks[k]);
  cpu::apply_allowed_token_ids(row, o, log);
  cpu::apply_bad_words(row, o, b.outputs[k], log);
  cpu::apply_min_tokens(row, o, b.outputs[k].size(), log);
  cpu::apply_logit_bias(row, o, log);
  cpu::apply_penalties(row, o, b.prompts[k], b.outputs[k], penalties, log);
  cpu::apply_reasoning_budget(row, o, b.outputs[k], log);
  return row;
}

// What the kernel reads for row r: the edits written over the raw row, through the sample mask.
std::vector<float> kernel_processed(const PackedSampling& p, std::size_t r, const std::vector<float>& raw) {
  const SampleRowParams& q = p.rows[r];
  std::vector<float> row(raw.begin(), raw.begin() + kValid);
  for (int32_t e = 0; e < q.edit_count; ++e) {
    const SampleEdit& ed = p.edits[static_cast<std::size_t>(q.edit_begin + e)];
    row[static_cast<std::size_t>(ed.id)] = edited_logit(raw[static_cast<std::size_t>(ed.id)], ed, p.biases.data(), q);
  }
  if (q.sample_mask >= 0) {
    const uint32_t* m = p.masks.data() + q.sample_mask;
    for (std::size_t i = 0; i < row.size(); ++i)
      if (!((m[i >> 5] >> (i & 31)) & 1u)) row[i] = -INFINITY;
  }
  return row;
}

TEST(CudaSamplingPack, EditsAndMasksGiveTheCpuProcessorsRow) {
  Batch b = make_batch();
  const std::span<const SampleRow> rows = b.make_rows();
  uint64_t draws = 0;
  const SamplingConfig config{kVocab, kValid, 3, &draws, 1};
  PackedSampling p;
  pack_sampling(rows, config, kVocab + 8, p);
  ASSERT_EQ(p.rows.size(), rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::vector<float> raw = testing::random_logits(kVocab, 40 + static_cast<uint32_t>(k), 2.0f);
    raw[7] = -1.5f;  // a negative logit under the repetition penalty
    const std::vector<float> want = cpu_processed(b, k, raw);
    const std::vector<float> got = kernel_processed(p, k, raw);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "row " << k << " token " << i;
    EXPECT_EQ(p.rows[k].logits_offset, static_cast<int64_t>(k) * (kVocab + 8));
  }
  // Each edited token once per row, none past the valid vocabulary.
  for (const SampleRowParams& q : p.rows) {
    std::vector<int32_t> ids;
    for (int32_t e = 0; e < q.edit_count; ++e) ids.push_back(p.edits[static_cast<std::size_t>(q.edit_begin + e)].id);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
    for (int32_t id : ids) EXPECT_LT(id, kValid);
  }
  // Row 0: 17 biased twice, in order; 5 banned (bad word) before its bias; 9 banned; 3, 11 stop ids.
  const SampleRowParams& q0 = p.rows[0];
  EXPECT_EQ(q0.sample_mask, -1);
  EXPECT_EQ(q0.logprob_mask, -1);
  // Rows 1 and 2 carry a selection mask and the grammar's own words for the logprobs.
  EXPECT_GE(p.rows[1].sample_mask, 0);
  EXPECT_GE(p.rows[1].logprob_mask, 0);
  for (int32_t w = 0; w < p.mask_words; ++w)
    EXPECT_EQ(p.masks[static_cast<std::size_t>(p.rows[2].logprob_mask + w)],
              static_cast<uint32_t>(b.bitmasks[2][static_cast<std::size_t>(w)]));
  EXPECT_EQ(p.mask_words, (kValid + 31) / 32);
}

TEST(CudaSamplingPack, UniformsAndTheEngineCounterAreTheCpuOps) {
  Batch b = make_batch();
  const std::span<const SampleRow> rows = b.make_rows();
  uint64_t draws = 100;
  PackedSampling p;
  pack_sampling(rows, SamplingConfig{kVocab, kValid, 77, &draws, 1}, kVocab, p);
  EXPECT_EQ(draws, 102u) << "two unseeded random rows";
  EXPECT_EQ(p.rows[0].mode, kSampleGreedy);
  EXPECT_EQ(p.rows[0].uniform, 0.0);
  EXPECT_EQ(p.rows[1].mode, kSampleRandom);
  EXPECT_EQ(p.rows[1].uniform, cpu::philox_uniform(11, cpu::RngStream::kSeededRequest, 2));
  EXPECT_EQ(p.rows[3].uniform, cpu::philox_uniform(77, cpu::RngStream::kEngine, 100));
  EXPECT_EQ(p.rows[4].uniform, cpu::philox_uniform(77, cpu::RngStream::kEngine, 101));
  EXPECT_EQ(p.rows[3].top_k, 40);
  EXPECT_EQ(p.rows[4].top_k, 0) << "top_k >= the valid vocabulary is off";
  EXPECT_EQ(p.rows[3].min_p, 0.05f);
  EXPECT_EQ(p.rows[3].log_min_p, std::log(0.05f));
  EXPECT_EQ(p.rows[1].temperature, 0.8f);
  // A second call reuses the storage and starts afresh.
  pack_sampling(rows.first(1), SamplingConfig{kVocab, kValid, 77, &draws, 1}, kVocab, p);
  EXPECT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(draws, 102u);
}

TEST(CudaSamplingPack, LogprobModesAndResults) {
  Batch b = make_batch();
  const std::span<const SampleRow> rows = b.make_rows();
  uint64_t draws = 0;
  PackedSampling p;
  pack_sampling(rows, SamplingConfig{kVocab, kValid, 1, &draws, 1}, kVocab, p);
  EXPECT_EQ(p.rows[0].logprobs, kLogprobsTop);
  EXPECT_EQ(p.rows[0].num_top, 5);
  EXPECT_EQ(p.rows[1].logprobs, kLogprobsIds);
  EXPECT_EQ(p.rows[1].num_top, 4);
  EXPECT_EQ(std::vector<int32_t>(p.logprob_ids.begin() + p.rows[1].ids_begin,
                                 p.logprob_ids.begin() + p.rows[1].ids_begin + 4),
            (std::vector<int32_t>{17, 5, 630, 17}));
  EXPECT_EQ(p.rows[2].logprobs, kLogprobsTop) << "logprobs -1: the whole valid vocabulary (600 here)";
  EXPECT_EQ(p.rows[2].num_top, kValid);
  EXPECT_EQ(p.rows[3].logprobs, kLogprobsNone);
  EXPECT_EQ(p.rows[4].logprobs, kLogprobsTop);
  EXPECT_EQ(p.rows[4].num_top, 0);
  EXPECT_EQ(p.rows[1].out_top, 5);
  EXPECT_EQ(p.rows[2].out_top, 9);
  EXPECT_EQ(p.top_entries, 9 + kValid);

  std::vector<SampleRowResult> results(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) results[r] = SampleRowResult{static_cast<int32_t>(10 + r), -0.5f, 3};
  std::vector<SampleTopEntry> tops(static_cast<std::size_t>(p.top_entries));
  for (int i = 0; i < p.top_entries; ++i)
    tops[static_cast<std::size_t>(i)] = SampleTopEntry{100 + i, -1.0f * static_cast<float>(i)};
  std::vector<SampleResult> out(rows.size());
  unpack_sampling(p, rows, results, tops, out);
  EXPECT_EQ(out[0].token, 10);
  EXPECT_TRUE(out[0].has_logprobs);
  EXPECT_EQ(out[0].rank, 3);
  EXPECT_EQ(out[0].num_top, 5);
  EXPECT_EQ(b.tops[0][4].token, 104);
  EXPECT_EQ(out[1].num_top, 4);
  EXPECT_EQ(b.tops[1][0].token, 105);
  EXPECT_EQ(b.tops[1][3].logprob, -8.0f);
  EXPECT_FALSE(out[3].has_logprobs);
  EXPECT_EQ(out[3].token, 13);
  EXPECT_TRUE(out[4].has_logprobs);
  EXPECT_EQ(out[4].num_top, 0);
  EXPECT_EQ(out[2].num_top, kValid);
  EXPECT_EQ(b.tops[2][0].token, 109);
}

TEST(CudaSamplingPack, TopNBeyondTheDeviceRankingGoesToTheHost) {
  constexpr int64_t vocab = 4096, valid = 4000;
  std::vector<SamplingOptions> o(4);
  o[0].logprobs = -1;
  o[1].logprobs = kMaxDeviceTop;
  o[2].logprobs = kMaxDeviceTop + 1;
  o[3].logprobs = 20;
  std::vector<std::vector<TokenLogprob>> top(4, std::vector<TokenLogprob>(valid));
  std::vector<SampleRow> rows;
  for (std::size_t k = 0; k < 4; ++k) rows.push_back(SampleRow{&o[k], {}, {}, top[k]});
  uint64_t draws = 0;
  PackedSampling p;
  pack_sampling(rows, SamplingConfig{vocab, valid, 1, &draws, 1}, vocab, p);
  EXPECT_EQ(p.rows[0].logprobs, kLogprobsHost);
  EXPECT_EQ(p.rows[0].num_top, 0);
  EXPECT_EQ(p.rows[1].logprobs, kLogprobsTop);
  EXPECT_EQ(p.rows[1].num_top, kMaxDeviceTop);
  EXPECT_EQ(p.rows[2].logprobs, kLogprobsHost);
  EXPECT_EQ(p.rows[3].out_top, kMaxDeviceTop);
  EXPECT_EQ(p.top_entries, kMaxDeviceTop + 20);
  std::vector<SampleRowResult> results(4, SampleRowResult{7, 0.0f, 0});
  std::vector<SampleTopEntry> tops(static_cast<std::size_t>(p.top_entries));
  std::vector<SampleResult> out(4);
  unpack_sampling(p, rows, results, tops, out);
  EXPECT_EQ(out[0].token, 7) << "host-path rows keep the kernel's token; their logprobs come from the host";
  EXPECT_FALSE(out[0].has_logprobs);
  EXPECT_TRUE(out[1].has_logprobs);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
