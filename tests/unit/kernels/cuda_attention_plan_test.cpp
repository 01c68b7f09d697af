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
#include <string>
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

constexpr int kPlanThreadsForTests = 256;  // attention_kernels.cuh's kPlanThreads (a .cuh g++ does not read)

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

// ---- The device plan: attention_plan.h's steps as the planning kernel runs them ----

// The planner as it was written before the plan moved to the device (a serial list builder), kept
// here as an independent reference for the step functions the device runs.
Plan reference_plan(std::span<const PlanSeq> seqs, int head_dim, std::size_t budget) {
  Plan plan;
  plan.seqs.resize(seqs.size());
  std::size_t left = budget;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const PlanSeq& s = seqs[i];
    if (s.rows == 0) continue;
    const int64_t nq = s.rows * s.group;
    SeqPlan& sp = plan.seqs[i];
    sp.nchunks = chunks_for_keys(keys_of_row(s, s.rows - 1));
    const int64_t partials = s.n_kv_heads * nq * sp.nchunks;
    const std::size_t need = static_cast<std::size_t>(partials) * partial_bytes(head_dim);
    sp.split = s.causal && s.rows <= kSplitMaxRows && sp.nchunks > 1 && need <= left;
    if (sp.split) {
      left -= need;
      sp.partial_base = plan.partials;
      plan.partials += partials;
    }
    const int64_t blocks = (nq + kQueriesPerBlock - 1) / kQueriesPerBlock;
    for (int kvh = 0; kvh < s.n_kv_heads; ++kvh)
      for (int64_t b = 0; b < blocks; ++b) {
        Item item;
        item.seq = static_cast<int32_t>(i);
        item.kvh = kvh;
        item.r0 = static_cast<int32_t>((sp.split ? b : blocks - 1 - b) * kQueriesPerBlock);
        if (!sp.split) {
          plan.first.push_back(item);
          continue;
        }
        const int64_t last_t = (std::min<int64_t>(item.r0 + kQueriesPerBlock, nq) - 1) / s.group;
        for (int64_t c = 0; c < chunks_for_keys(keys_of_row(s, last_t)); ++c) {
          item.chunk = static_cast<int32_t>(c);
          item.mode = ItemMode::kStats;
          plan.first.push_back(item);
          item.mode = ItemMode::kOut;
          plan.second.push_back(item);
        }
        item.chunk = -1;
        item.mode = ItemMode::kOut;
        plan.merge.push_back(item);
      }
  }
  return plan;
}

using ItemTuple = std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t>;
std::vector<ItemTuple> tuples(const Item* items, std::size_t n) {
  std::vector<ItemTuple> v;
  for (std::size_t i = 0; i < n; ++i)
    v.emplace_back(items[i].seq, items[i].kvh, items[i].r0, items[i].chunk, static_cast<int32_t>(items[i].mode));
  return v;
}

void expect_same_plan(const Plan& got, const Plan& want, const std::string& what) {
  ASSERT_EQ(got.seqs.size(), want.seqs.size()) << what;
  for (std::size_t i = 0; i < want.seqs.size(); ++i) {
    EXPECT_EQ(got.seqs[i].split, want.seqs[i].split) << what << " seq " << i;
    EXPECT_EQ(got.seqs[i].nchunks, want.seqs[i].nchunks) << what << " seq " << i;
    if (want.seqs[i].split) EXPECT_EQ(got.seqs[i].partial_base, want.seqs[i].partial_base) << what << " seq " << i;
  }
  EXPECT_EQ(got.partials, want.partials) << what;
  EXPECT_EQ(tuples(got.first.data(), got.first.size()), tuples(want.first.data(), want.first.size())) << what;
  EXPECT_EQ(tuples(got.second.data(), got.second.size()), tuples(want.second.data(), want.second.size())) << what;
  EXPECT_EQ(tuples(got.merge.data(), got.merge.size()), tuples(want.merge.data(), want.merge.size())) << what;
}

// The planning kernel's work, emulated: step 1 by "thread 0", step 2 by `nthreads` threads (in
// reverse thread order, to show the order does not matter), into lists of the bounds' sizes.
Plan device_plan(std::span<const PlanSeq> seqs, int head_dim, std::size_t budget, int nthreads) {
  const PlanBounds bounds = plan_bounds(seqs, head_dim, budget);
  const int64_t n = static_cast<int64_t>(seqs.size());
  Plan plan;
  plan.seqs.resize(seqs.size());
  PlanCounts counts;
  // The host passes the kernel what the bounds' partial regions hold.
  plan_sequences(seqs.data(), n, head_dim, static_cast<std::size_t>(bounds.max_partials) * partial_bytes(head_dim),
                 plan.seqs.data(), &counts);
  EXPECT_LE(counts.first, bounds.first());
  EXPECT_LE(counts.second, bounds.second());
  EXPECT_LE(counts.merge, bounds.merge());
  EXPECT_LE(counts.partials, bounds.max_partials);
  const Item poison{-7, -7, -7, -7, ItemMode::kFused};
  std::vector<Item> first(static_cast<std::size_t>(bounds.first()), poison);
  std::vector<Item> second(static_cast<std::size_t>(bounds.second()), poison);
  std::vector<Item> merge(static_cast<std::size_t>(bounds.merge()), poison);
  for (int tid = nthreads - 1; tid >= 0; --tid)
    plan_items(seqs.data(), plan.seqs.data(), n, tid, nthreads, first.data(), second.data(), merge.data());
  plan.partials = counts.partials;
  plan.first.assign(first.begin(), first.begin() + counts.first);
  plan.second.assign(second.begin(), second.begin() + counts.second);
  plan.merge.assign(merge.begin(), merge.begin() + counts.merge);
  return plan;
}

// Step shapes: decode batches at long and short contexts, mixed prefill + decode steps, speculative
// rows (2 .. 16), the model's heads (2 kv heads x 16) and others, budgets that cut the split list.
std::vector<PlanSeq> random_step(std::mt19937& rng) {
  std::vector<PlanSeq> seqs(1 + rng() % 12);
  const int hkv = 1 + static_cast<int>(rng() % 4), group = 1 << (rng() % 5);
  for (PlanSeq& s : seqs) {
    const int kind = static_cast<int>(rng() % 6);
    s.rows = kind == 0 ? static_cast<int64_t>(17 + rng() % 300) : kind == 1 ? static_cast<int64_t>(rng() % 17) : 1;
    s.pos0 = kind == 5 ? static_cast<int64_t>(rng() % 262000) : static_cast<int64_t>(rng() % 40000);
    s.n_kv_heads = hkv;
    s.group = group;
  }
  return seqs;
}

TEST(CudaAttentionDevicePlan, HostPlannerIsTheReferencePlanner) {
  std::mt19937 rng(23);
  const std::size_t budgets[] = {0, std::size_t{1} << 20, std::size_t{8} << 20, kMinSplitBudgetBytes, kSplitBudgetBytes};
  int split = 0, cut = 0;  // the shapes reach both outcomes of the budget
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<PlanSeq> seqs = random_step(rng);
    const int head_dim = trial % 3 == 0 ? 128 : 256;
    const std::size_t budget = budgets[trial % 5];
    const Plan plan = plan_attention(seqs, head_dim, budget);
    expect_same_plan(plan, reference_plan(seqs, head_dim, budget), "trial " + std::to_string(trial));
    if (HasFailure()) return;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      split += plan.seqs[i].split;
      cut += !plan.seqs[i].split && seqs[i].rows > 0 && seqs[i].rows <= kSplitMaxRows && plan.seqs[i].nchunks > 1;
    }
  }
  EXPECT_GT(split, 100);
  EXPECT_GT(cut, 50);
  const std::vector<PlanSeq> dense = {{37, 0, 16, 1, false}, {290, 0, 16, 1, false}};
  expect_same_plan(plan_attention(dense, 72, kSplitBudgetBytes), reference_plan(dense, 72, kSplitBudgetBytes), "dense");
}

TEST(CudaAttentionDevicePlan, BlockParallelPlanEqualsTheHostPlan) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<PlanSeq> seqs = random_step(rng);
    const std::size_t budget = trial % 4 == 0 ? std::size_t{4} << 20 : kSplitBudgetBytes;
    for (int threads : {1, 7, kPlanThreadsForTests})
      expect_same_plan(device_plan(seqs, 256, budget, threads), plan_attention(seqs, 256, budget),
                       "trial " + std::to_string(trial) + " threads " + std::to_string(threads));
    if (HasFailure()) return;
  }
}

// What a step graph relies on: the bounds (scratch sizes, grids) of a decode batch do not move with
// its positions, while the plan inside them does (long contexts split).
TEST(CudaAttentionDevicePlan, BoundsFollowRowsNotPositions) {
  for (int batch : {1, 4, 64}) {
    std::vector<PlanSeq> a(static_cast<std::size_t>(batch)), b = a;
    for (int i = 0; i < batch; ++i) {
      a[static_cast<std::size_t>(i)] = causal(1, 10 + i, 2, 16);
      b[static_cast<std::size_t>(i)] = causal(1, 33000 - 37 * i, 2, 16);
    }
    const PlanBounds ba = plan_bounds(a, 256, kSplitBudgetBytes), bb = plan_bounds(b, 256, kSplitBudgetBytes);
    EXPECT_EQ(ba.units, bb.units);
    EXPECT_EQ(ba.max_partials, bb.max_partials);
    EXPECT_EQ(ba.units, 2 * 2 * batch);
    const Plan pa = device_plan(a, 256, kSplitBudgetBytes, 256), pb = device_plan(b, 256, kSplitBudgetBytes, 256);
    EXPECT_EQ(pa.partials, 0);                      // short: fused
    EXPECT_TRUE(pb.seqs[0].split) << batch;         // long: the first sequences split
    EXPECT_EQ(pb.seqs[0].nchunks, chunks_for_keys(33000));
    expect_covers(pb, b);
  }
  // Rows past kSplitMaxRows (prefill) or dense segments: no split region at all.
  const std::vector<PlanSeq> prefill = {causal(17, 0), causal(300, 5000)};
  EXPECT_EQ(plan_bounds(prefill, 256, kSplitBudgetBytes).max_partials, 0);
  const std::vector<PlanSeq> dense = {{37, 0, 16, 1, false}};
  EXPECT_EQ(plan_bounds(dense, 72, kSplitBudgetBytes).max_partials, 0);
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
