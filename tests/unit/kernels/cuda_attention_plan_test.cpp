// The host-side halves of attention on CUDA, on the CPU: the conversions the kernels run
// (cuda/attention_numerics.h) against the CPU op's (tensor/float_formats.h), and the plan
// (cuda/attention_plan.h): which blocks compute which (query, chunk), where split partials go, and
// that a sequence's plan does not depend on the other sequences of the step.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "kernels/cuda/attention_numerics.h"
#include "kernels/cuda/attention_plan.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::cuda::attn {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CudaAttentionNumerics, E4m3DecodeMatchesTheTable) {
  for (int c = 0; c < 256; ++c) {
    const float want = e4m3_table()[c], got = e4m3_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f32_bits(got), f32_bits(want)) << c;  // NaN codes too: bf16(NaN * scale) keeps the bits
  }
}

TEST(CudaAttentionNumerics, E4m3EncodeMatchesTheCpu) {
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, -448.0f, 464.0f, 464.001f, 480.0f, 1e30f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::denorm_min(), -1e-40f, 1.0f / 1024, 3.0f / 2048,
                           std::ldexp(1.0f, -10), std::ldexp(1.0f, -7), std::ldexp(1.5f, -7)};
  // Every e4m3 value, the midpoints between neighbours (ties to even) and one ulp either side.
  for (int c = 0; c < 127; ++c) {
    const float a = e4m3_table()[c], b = e4m3_table()[c + 1];
    if (std::isnan(b)) continue;
    const float mid = (a + b) / 2;
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  // Every bf16 value divided by a checkpoint-like scale (the write path's inputs), and random bits.
  for (uint32_t b = 0; b < 65536; ++b)
    for (float scale : {1.0f, 0.05f, 0.0123f}) xs.push_back(bf16_bits_to_f32(static_cast<uint16_t>(b)) / scale);
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) xs.push_back(from_bits(rng()));
  int bad = 0;
  for (float x : xs) {
    const uint8_t want = fp4serve::f32_to_e4m3(x), got = f32_to_e4m3(x);
    if (want != got && ++bad <= 10) ADD_FAILURE() << "x=" << x << " (bits " << std::hex << f32_bits(x) << ") cpu 0x"
                                                  << int(want) << " cuda 0x" << int(got);
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaAttentionNumerics, Bf16RoundingMatchesTheCpu) {
  std::mt19937 rng(3);
  for (int i = 0; i < 300000; ++i) {
    const float x = from_bits(rng());
    ASSERT_EQ(f32_to_bf16_bits(x), fp4serve::f32_to_bf16(x)) << std::hex << f32_bits(x);
  }
  for (uint32_t u : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x3F808000u, 0x3F818000u})
    EXPECT_EQ(f32_to_bf16_bits(from_bits(u)), fp4serve::f32_to_bf16(from_bits(u))) << std::hex << u;
}

// dot_tile_canonical's transposing halving tree (attention_kernels.cuh), emulated lane by lane: lane
// k ends with key k's sum, and it is the CPU's reduce32 (kernels_scalar.cpp) of the 32 lanes'
// accumulators, bit for bit.
TEST(CudaAttentionNumerics, TransposedTreeIsTheCanonicalTree) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int trial = 0; trial < 50; ++trial) {
    float acc[32][32];  // [lane][key]: lane l's accumulator for key k
    for (auto& lane : acc)
      for (float& x : lane) x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
    float v[32][32];
    std::memcpy(v, acc, sizeof(v));
    for (int o = 16; o >= 1; o >>= 1) {
      float give[32][16], keep[32][16];
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < o; ++i) {
          const bool upper = (l & o) != 0;
          give[l][i] = upper ? v[l][i] : v[l][i + o];
          keep[l][i] = upper ? v[l][i + o] : v[l][i];
        }
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < o; ++i) v[l][i] = keep[l][i] + give[l ^ o][i];  // __shfl_xor_sync(give, o)
    }
    for (int k = 0; k < 32; ++k) {
      float a[32];
      for (int l = 0; l < 32; ++l) a[l] = acc[l][k];
      for (int i = 0; i < 16; ++i) a[i] = a[i] + a[i + 16];
      for (int i = 0; i < 8; ++i) a[i] = a[i] + a[i + 8];
      for (int i = 0; i < 4; ++i) a[i] = a[i] + a[i + 4];
      for (int i = 0; i < 2; ++i) a[i] = a[i] + a[i + 2];
      const float want = a[0] + a[1];
      ASSERT_EQ(f32_bits(v[k][0]), f32_bits(want)) << "trial " << trial << " key " << k;
    }
  }
}

PlanSeq causal(int64_t rows, int64_t pos0, int hkv = 2, int group = 8) { return {rows, pos0, hkv, group, true}; }

// Every (query, chunk) a sequence's queries need, each exactly once: from the fused items (all chunks
// of their queries) or from the split stats items (one chunk; with a matching out item and partial).
void expect_covers(const Plan& plan, std::span<const PlanSeq> seqs) {
  std::set<std::tuple<int, int64_t, int64_t>> seen;  // (seq, query index, chunk)
  std::set<int64_t> partials;
  for (const Item& it : plan.first) {
    const PlanSeq& s = seqs[static_cast<size_t>(it.seq)];
    const SeqPlan& sp = plan.seqs[static_cast<size_t>(it.seq)];
    EXPECT_EQ(it.mode == ItemMode::kFused, !sp.split);
    const int64_t nq = s.rows * s.group;
    for (int w = 0; w < kQueriesPerBlock; ++w) {
      const int64_t r = it.r0 + w;
      if (r >= nq) break;
      const int64_t qi = it.kvh * nq + r, nc = chunks_for_keys(keys_of_row(s, r / s.group));
      for (int64_t c = 0; c < nc; ++c) {
        if (it.mode == ItemMode::kStats && c != it.chunk) continue;
        EXPECT_TRUE(seen.insert({it.seq, qi, c}).second) << "seq " << it.seq << " query " << qi << " chunk " << c;
        if (sp.split) {
          const int64_t p = sp.partial_base + qi * sp.nchunks + c;
          EXPECT_LT(p, plan.partials);
          EXPECT_TRUE(partials.insert(p).second);
        }
      }
    }
  }
  std::size_t want = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i)
    for (int64_t r = 0; r < seqs[i].rows * seqs[i].group; ++r)
      want += static_cast<size_t>(seqs[i].n_kv_heads * chunks_for_keys(keys_of_row(seqs[i], r / seqs[i].group)));
  EXPECT_EQ(seen.size(), want);
  // Split: one out item per stats item, one merge item per query block.
  EXPECT_EQ(plan.second.size(), static_cast<size_t>(std::count_if(plan.first.begin(), plan.first.end(), [](const Item& it) {
              return it.mode == ItemMode::kStats;
            })));
}

TEST(CudaAttentionPlan, LongDecodeSplitsOverItsChunks) {
  const std::vector<PlanSeq> seqs = {causal(1, 32767)};  // a decode at 32k keys, the model's heads
  const Plan plan = plan_attention(seqs, 256, kSplitBudgetBytes);
  ASSERT_TRUE(plan.seqs[0].split);
  EXPECT_EQ(plan.seqs[0].nchunks, 128);
  EXPECT_EQ(plan.first.size(), 2u * 128);  // kv heads x chunks: enough blocks to fill the SMs
  EXPECT_EQ(plan.second.size(), 2u * 128);
  EXPECT_EQ(plan.merge.size(), 2u);
  EXPECT_EQ(plan.partials, 2 * 8 * 128);
  expect_covers(plan, seqs);
  EXPECT_GE(partial_stats_bytes(plan), static_cast<size_t>(plan.partials) * 8);
  EXPECT_GE(partial_out_bytes(plan, 256), static_cast<size_t>(plan.partials) * 256 * 4);
  EXPECT_GE(partial_scores_bytes(plan), static_cast<size_t>(plan.partials) * kChunkKeys * 4);
}

TEST(CudaAttentionPlan, PrefillsAndShortContextsAreFused) {
  const std::vector<PlanSeq> seqs = {causal(7, 0), causal(1, 100), causal(40, 3000), causal(3, 5, 2, 2)};
  const Plan plan = plan_attention(seqs, 256, kSplitBudgetBytes);
  for (const SeqPlan& sp : plan.seqs) EXPECT_FALSE(sp.split);
  EXPECT_EQ(plan.partials, 0);
  EXPECT_TRUE(plan.second.empty());
  EXPECT_TRUE(plan.merge.empty());
  // kv heads x query blocks of 8 (query rows x group).
  EXPECT_EQ(plan.first.size(), 2u * 7 + 2u * 1 + 2u * 40 + 2u * 1);
  expect_covers(plan, seqs);
}

TEST(CudaAttentionPlan, MixedStepCoversEveryQueryChunkOnce) {
  const std::vector<PlanSeq> seqs = {causal(1, 3000), causal(20, 250), causal(3, 700), causal(5, 255, 2, 2),
                                     causal(0, 50), causal(16, 1000, 1, 4)};
  const Plan plan = plan_attention(seqs, 256, kSplitBudgetBytes);
  EXPECT_TRUE(plan.seqs[0].split);
  EXPECT_FALSE(plan.seqs[1].split);  // more rows than a split takes
  EXPECT_TRUE(plan.seqs[2].split);
  EXPECT_TRUE(plan.seqs[3].split);
  EXPECT_TRUE(plan.seqs[5].split);
  expect_covers(plan, seqs);
}

TEST(CudaAttentionPlan, ASequencesItemsDoNotDependOnTheOthers) {
  const std::vector<PlanSeq> batch = {causal(9, 40), causal(1, 5000), causal(2, 900)};
  const Plan all = plan_attention(batch, 256, kSplitBudgetBytes);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Plan alone = plan_attention(std::span<const PlanSeq>(&batch[i], 1), 256, kSplitBudgetBytes);
    EXPECT_EQ(alone.seqs[0].split, all.seqs[i].split);
    EXPECT_EQ(alone.seqs[0].nchunks, all.seqs[i].nchunks);
    auto of = [](const std::vector<Item>& items, int32_t seq) {
      std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t>> v;
      for (const Item& it : items)
        if (it.seq == seq) v.emplace_back(it.kvh, it.r0, it.chunk, static_cast<int32_t>(it.mode));
      return v;
    };
    EXPECT_EQ(of(alone.first, 0), of(all.first, static_cast<int32_t>(i)));
    EXPECT_EQ(of(alone.second, 0), of(all.second, static_cast<int32_t>(i)));
    EXPECT_EQ(of(alone.merge, 0), of(all.merge, static_cast<int32_t>(i)));
  }
}

TEST(CudaAttentionPlan, SplitBudgetFallsBackToFused) {
  const std::vector<PlanSeq> seqs = {causal(1, 32767), causal(1, 32767)};
  const std::size_t one = static_cast<size_t>(2 * 8 * 128) * partial_bytes(256);
  EXPECT_EQ(partial_bytes(256), (256 + 2 + 256) * sizeof(float));
  const Plan plan = plan_attention(seqs, 256, one);  // room for the first only
  EXPECT_TRUE(plan.seqs[0].split);
  EXPECT_FALSE(plan.seqs[1].split);
  expect_covers(plan, seqs);
}

TEST(CudaAttentionPlan, SplitBudgetFollowsTheReservedScratch) {
  EXPECT_EQ(split_budget(0), kMinSplitBudgetBytes);
  EXPECT_EQ(split_budget(std::size_t{80} << 20), std::size_t{80} << 20);
  EXPECT_EQ(split_budget(std::size_t{1} << 33), kSplitBudgetBytes);
  // Even the smallest budget splits a decode at the longest context the model takes (256k keys).
  const std::vector<PlanSeq> seqs = {causal(1, 262143)};
  EXPECT_TRUE(plan_attention(seqs, 256, kMinSplitBudgetBytes).seqs[0].split);
}

TEST(CudaAttentionPlan, DenseSegmentsAreFusedAndSeeTheWholeSegment) {
  const std::vector<PlanSeq> segs = {{37, 0, 16, 1, false}, {290, 0, 16, 1, false}};
  const Plan plan = plan_attention(segs, 72, kSplitBudgetBytes);
  EXPECT_EQ(plan.seqs[1].nchunks, 2);
  EXPECT_EQ(plan.partials, 0);
  EXPECT_EQ(plan.first.size(), 16u * 5 + 16u * 37);
  expect_covers(plan, segs);
}

TEST(CudaAttentionPlan, RejectsBadShapes) {
  const std::vector<PlanSeq> ok = {causal(1, 3)};
  EXPECT_THROW(plan_attention(ok, 0, kSplitBudgetBytes), std::invalid_argument);
  EXPECT_THROW(plan_attention(ok, 257, kSplitBudgetBytes), std::invalid_argument);
  const std::vector<PlanSeq> bad = {causal(1, -1)};
  EXPECT_THROW(plan_attention(bad, 64, kSplitBudgetBytes), std::invalid_argument);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda::attn

#endif  // FP4SERVE_HAVE_CUDA
