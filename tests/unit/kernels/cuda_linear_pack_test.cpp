// The CUDA linears' weight repacking (src/kernels/cuda/linear_pack.h), checked on the CPU: every
// format read back through the index math and decoders the kernel itself uses gives exactly the
// reference dequantization (weights.h), every packed slot is visited once, padding decodes to zero,
// and a host emulation of the kernel's schedule (steps over warps, scale units, warp-order sum)
// matches the CPU linear. This is the evidence for the kernel's addressing that needs no GPU.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cuda/linear_pack.h"

namespace fp4serve::kernels::cuda {
namespace {

using test::WeightKind;

const WeightKind kKinds[] = {WeightKind::kBf16,         WeightKind::kFp8Tensor, WeightKind::kFp8BlockF32,
                             WeightKind::kFp8BlockBf16, WeightKind::kNvfp4,     WeightKind::kInt4Gptq,
                             WeightKind::kInt4Packed};

// Off the 16-column block and the 128-K step, exactly on them, and several blocks of both.
std::vector<std::pair<int64_t, int64_t>> shapes_for(WeightKind f) {
  if (f == WeightKind::kNvfp4) return {{13, 272}, {16, 128}, {37, 80}, {130, 1040}};
  if (f == WeightKind::kInt4Gptq || f == WeightKind::kInt4Packed) return {{13, 384}, {16, 128}, {37, 128}, {130, 1024}};
  return {{13, 100}, {16, 128}, {37, 300}, {130, 1040}};
}

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || test::same_bits(a, b); }

void expect_reads_back(const WeightView& w, const std::string& what) {
  const PackedLinear p = pack_linear(w);
  ASSERT_EQ(p.n_pad() % kBlockN, 0) << what;
  ASSERT_GE(p.n_pad(), w.n) << what;
  ASSERT_EQ(p.steps, (w.k + kStepK - 1) / kStepK) << what;
  std::vector<float> ref(static_cast<size_t>(w.n * w.k));
  dequantize_rows_unscaled(w, 0, w.n, ref.data());
  int bad = 0;
  for (int64_t n = 0; n < p.n_pad(); ++n)
    for (int64_t k = 0; k < p.steps * kStepK; ++k) {
      const float got = packed_weight_value(p, n, k);
      const float want = (n < w.n && k < w.k) ? ref[static_cast<size_t>(n * w.k + k)] : 0.0f;
      if (!same_value(got, want) && !(want == 0.0f && got == 0.0f) && ++bad <= 5)
        ADD_FAILURE() << what << ": W(" << n << ", " << k << ") reads back " << got << ", reference " << want;
    }
  EXPECT_EQ(bad, 0) << what;
  const bool scaled = w.format == WeightLayout::kFp8Tensor || w.format == WeightLayout::kNvfp4;
  EXPECT_EQ(p.tensor_scale, scaled ? w.tensor_scale : 1.0f) << what;
}

TEST(CudaLinearPack, EveryFormatReadsBackAsTheReferenceDequantization) {
  for (WeightKind f : kKinds)
    for (auto [N, K] : shapes_for(f)) {
      const test::RandomWeight r = test::make_random_weight(f, N, K, 11);
      expect_reads_back(r.view, test::kind_name(f) + std::string(" [") + std::to_string(N) + ", " + std::to_string(K) + "]");
    }
}

// The NVFP4 block scales over their whole e4m3 range: zero, subnormals and the largest codes.
TEST(CudaLinearPack, Nvfp4ScalesOverTheirRange) {
  for (auto [lo, hi] : {std::pair<int, int>{0x00, 0x07}, {0x08, 0x7E}, {0x80, 0xFE}}) {
    const test::RandomWeight r = test::make_random_weight(WeightKind::kNvfp4, 24, 256, 3, lo, hi);
    expect_reads_back(r.view, "nvfp4 scales " + std::to_string(lo) + ".." + std::to_string(hi));
  }
}

// INT4 groups other than 128: units of 32 and 64 (partial sums per group) and 256 (the group's scale
// on each 128 of it).
TEST(CudaLinearPack, Int4GroupSizes) {
  for (int group : {32, 64, 256}) {
    const int64_t N = 21, K = 512;
    auto bytes = test::random_bytes(static_cast<size_t>(K / 8 * N * 4), 5);
    std::vector<int32_t> q(static_cast<size_t>(K / 8 * N));
    std::memcpy(q.data(), bytes.data(), bytes.size());
    std::vector<uint16_t> scales(static_cast<size_t>(K / group * N));
    const auto s = test::random_f32(scales.size(), 6, 0.02f);
    for (size_t i = 0; i < s.size(); ++i) scales[i] = f32_to_f16(std::fabs(s[i]) + 1e-3f);
    const WeightView w = int4_gptq_weight(q.data(), scales.data(), N, K, group);
    const PackedLinear p = pack_linear(w);
    EXPECT_EQ(p.unit_tiles, group < kStepK ? group / 16 : kTilesPerStep) << group;
    expect_reads_back(w, "int4 group " + std::to_string(group));
  }
}

TEST(CudaLinearPack, UnsupportedInt4GroupIsRejected) {
  const int64_t N = 4, K = 96;
  std::vector<int32_t> q(static_cast<size_t>(K / 8 * N), 0x12345678);
  std::vector<uint16_t> scales(static_cast<size_t>(K / 48 * N), f32_to_f16(0.5f));
  EXPECT_THROW(pack_linear(int4_gptq_weight(q.data(), scales.data(), N, K, 48)), std::invalid_argument);
}

// The forward map (lane, tile j, value i) -> (n, k) of the kernel's B fragments covers each (n, k)
// of a (tile, step) exactly once, and every value sits in its own bits of the lane's words.
TEST(CudaLinearPack, FragmentSlotsCoverEachValueOnce) {
  for (PackedKind kind : {PackedKind::kBf16, PackedKind::kFp8, PackedKind::kFp4, PackedKind::kInt4}) {
    const int bits = value_bits(kind);
    std::set<std::pair<int, int>> nk;
    std::set<std::tuple<int, int, int>> slots;  // (lane, word, shift)
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < kTilesPerStep; ++j)
        for (int i = 0; i < 4; ++i) {
          const int dn = value_dn(lane), dk = value_dk(lane, j, i);
          ASSERT_LT(dn, kTileN);
          ASSERT_LT(dk, kStepK);
          EXPECT_TRUE(nk.insert({dn, dk}).second);
          // The code's bits (all ones) in its word: no two values share a bit.
          const int word = value_word(bits, j, i);
          ASSERT_LT(word, 4 * vecs_per_step(kind));
          EXPECT_EQ(word, fragment_word(kind, j, i >> 1));
          const uint32_t placed = place_code(kind, j, i, ~0u);
          EXPECT_EQ(__builtin_popcount(placed), bits);
          for (int bit = 0; bit < 32; ++bit)
            if (placed >> bit & 1u) EXPECT_TRUE(slots.insert({lane, word, bit}).second);
        }
    EXPECT_EQ(nk.size(), size_t{kTileN * kStepK});
  }
}

// The register decoders over every code (and, for NVFP4, every block scale) in every position of a
// word, against float_formats.h's reference decoding; the other values of the word are random, so
// a decoder that reads a neighbour's bits fails.
TEST(CudaLinearPack, FragmentDecodersAreExactForEveryCode) {
  std::mt19937 rng(7);
  for (PackedKind kind : {PackedKind::kBf16, PackedKind::kFp8, PackedKind::kFp4, PackedKind::kInt4}) {
    const int bits = value_bits(kind);
    const uint32_t codes = kind == PackedKind::kBf16 ? 65536u : 1u << bits;
    int bad = 0;
    for (int j = 0; j < kTilesPerStep; ++j)
      for (int i = 0; i < 4; ++i)
        for (uint32_t code = 0; code < codes; code += (kind == PackedKind::kBf16 ? 7u : 1u)) {
          // Random neighbours: every other value of the word gets a random code.
          uint32_t word = 0;
          for (int i2 = 0; i2 < 4; ++i2)
            for (int j2 = 0; j2 < kTilesPerStep; ++j2)
              if (value_word(bits, j2, i2) == value_word(bits, j, i) && !(j2 == j && i2 == i))
                word |= place_code(kind, j2, i2, static_cast<uint32_t>(rng()));
          word |= place_code(kind, j, i, code);
          const int scales = kind == PackedKind::kFp4 ? 256 : 1;
          for (int sc = 0; sc < scales; ++sc) {
            if ((sc & 0x7F) == 0x7F) continue;  // NaN scales: not a checkpoint's
            const uint32_t pair = fragment_pair(kind, word, j, i >> 1, fp4_scale_pair(static_cast<uint32_t>(sc)));
            const float got = bits_to_float(((pair >> (16 * (i & 1))) & 0xFFFFu) << 16);
            float want = 0;
            switch (kind) {
              case PackedKind::kBf16: want = fp4serve::bf16_to_f32(static_cast<uint16_t>(code)); break;
              case PackedKind::kFp8: want = e4m3_to_f32(static_cast<uint8_t>(code)); break;
              case PackedKind::kInt4: want = static_cast<float>(static_cast<int>(code) - 8); break;
              case PackedKind::kFp4:
                want = e2m1_to_f32(static_cast<uint8_t>(code)) * e4m3_to_f32(static_cast<uint8_t>(sc));
                break;
            }
            if (!same_value(got, want) && ++bad <= 5)
              ADD_FAILURE() << "kind " << static_cast<int>(kind) << " tile " << j << " value " << i << " code " << code
                            << " scale " << sc << ": " << got << " != " << want;
          }
        }
    EXPECT_EQ(bad, 0) << "kind " << static_cast<int>(kind);
  }
}

// Steps over warps: step_warp is the kernel's loop (c0 + warp * turn + r), each warp's steps rise,
// and warps_used counts the warps that own a step.
TEST(CudaLinearPack, StepOwnershipDependsOnTheStepAlone) {
  for (PackedKind kind : {PackedKind::kBf16, PackedKind::kFp8, PackedKind::kFp4, PackedKind::kInt4})
    for (int64_t steps : {1, 2, 3, 7, 8, 16, 17, 40}) {
      std::set<int> owners;
      for (int64_t c0 = 0; c0 < steps; c0 += chunk_steps(kind))
        for (int warp = 0; warp < kWarpsK; ++warp)
          for (int r = 0; r < steps_per_turn(kind); ++r) {
            const int64_t s = c0 + warp * steps_per_turn(kind) + r;
            if (s >= steps) continue;
            EXPECT_EQ(step_warp(s, kind), warp);
            owners.insert(warp);
          }
      EXPECT_EQ(warps_used(steps, kind), static_cast<int>(owners.size())) << steps;
      EXPECT_EQ(*owners.rbegin() + 1, warps_used(steps, kind)) << "the owners are warps 0 .. used - 1";
    }
}

// The kernel's schedule on the host: per warp, its steps in order, the mma tile sums (here exact
// products summed in fp32), unit partial sums folded in with fmaf, the warps' sums in warp order,
// tensor_scale last. Not the GPU's bits (the mma's internal summation is its own), but the same
// indices and scales: it must agree with the CPU linear to matmul tolerance.
std::vector<float> emulate_kernel(const PackedLinear& p, const std::vector<float>& x, int64_t M) {
  std::vector<float> y(static_cast<size_t>(M * p.n));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < p.n; ++n) {
      const int64_t tile = n / kTileN;
      float warp_sum[kWarpsK] = {};
      for (int64_t s = 0; s < p.steps; ++s) {
        float& acc = warp_sum[step_warp(s, p.kind)];
        float part = 0.0f;
        for (int j = 0; j < kTilesPerStep; ++j) {
          float tile_sum = 0.0f;
          for (int kk = 0; kk < 16; ++kk) {
            const int64_t k = s * kStepK + j * 16 + kk;
            const float xv = k < p.k ? x[static_cast<size_t>(m * p.k + k)] : 0.0f;
            // The unscaled value: the B fragment the kernel decodes (unit scale applied below).
            const int dn = static_cast<int>(n % kTileN), r = kk;
            const int lane = dn * 4 + (r % 8) / 2, i = (r & 1) + (r >= 8 ? 2 : 0);
            const float wv = packed_fragment_value(p, tile, s, lane, j, i);
            tile_sum += xv * wv;
          }
          if (p.unit_tiles) {
            part += tile_sum;
            if ((j + 1) % p.unit_tiles == 0) {
              acc = std::fma(part, p.unit_scales[static_cast<size_t>(unit_of(s, j, p.unit_tiles) * p.n_pad() + n)], acc);
              part = 0.0f;
            }
          } else {
            acc += tile_sum;
          }
        }
      }
      float v = warp_sum[0];
      for (int w = 1; w < warps_used(p.steps, p.kind); ++w) v += warp_sum[w];
      y[static_cast<size_t>(m * p.n + n)] = v * p.tensor_scale;
    }
  return y;
}

TEST(CudaLinearPack, EmulatedScheduleMatchesTheCpuLinear) {
  for (WeightKind f : kKinds)
    for (auto [N, K] : {shapes_for(f)[0], shapes_for(f)[3]}) {
      const test::RandomWeight r = test::make_random_weight(f, N, K, 21);
      const int64_t M = 3;
      const auto x = test::random_bf16_values(static_cast<size_t>(M * K), 22);
      const PackedLinear p = pack_linear(r.view);
      const auto got = emulate_kernel(p, x, M);
      std::vector<float> want(static_cast<size_t>(M * N));
      linear(x.data(), M, K, r.view, want.data(), N, cpu::Isa::kScalar);
      double err = 0, ref = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        ref += double(want[i]) * want[i];
      }
      EXPECT_LT(err / ref, 1e-10) << test::kind_name(f) << " [" << N << ", " << K << "]";
    }
}

// linears() launches: one per kernel instantiation, outputs in order, never more than the launch
// holds, every output exactly once.
TEST(CudaLinearPack, LaunchPlanGroupsOutputsOfOneKernel) {
  using K = PackedKind;
  const std::vector<LaunchKey> keys = {{K::kBf16, 0}, {K::kFp4, 0}, {K::kInt4, 8}, {K::kBf16, 0},
                                       {K::kFp8, 0},  {K::kFp8, 8}, {K::kFp4, 0},  {K::kInt4, 2},
                                       {K::kBf16, 0}, {K::kBf16, 0}, {K::kBf16, 0}};
  const auto plan = plan_launches(keys, 4);
  const std::vector<std::vector<int>> want = {{0, 3, 8, 9}, {1, 6}, {2}, {4}, {5}, {7}, {10}};
  EXPECT_EQ(plan, want);
  EXPECT_TRUE(plan_launches({}, 4).empty());
}

TEST(CudaLinearPack, GroupedTileBoundCoversEverySplit) {
  // Worst cases: every expert with one row, or with 17 rows (two tiles each).
  for (int64_t experts : {1, 8, 256})
    for (int64_t rows : {0, 1, 5, 16, 17, 300, 4096}) {
      int64_t worst = 0;
      for (int64_t per : {int64_t{1}, int64_t{16}, int64_t{17}, rows}) {
        if (per == 0) continue;
        int64_t left = rows, tiles = 0;
        for (int64_t e = 0; e < experts && left > 0; ++e) {
          const int64_t r = e + 1 == experts ? left : std::min(per, left);
          tiles += (r + kBlockM - 1) / kBlockM;
          left -= r;
        }
        worst = std::max(worst, tiles);
      }
      EXPECT_LE(worst, grouped_tile_bound(rows, experts)) << experts << " experts, " << rows << " rows";
    }
  // Offsets out of order or outside x are clamped into x.
  const int32_t offsets[] = {-5, 3, 2, 100};
  int64_t b = 0, e = 0;
  expert_rows(offsets, 0, 10, &b, &e);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 3);
  expert_rows(offsets, 1, 10, &b, &e);
  EXPECT_EQ(b, 3);
  EXPECT_EQ(e, 3);
  expert_rows(offsets, 2, 10, &b, &e);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(e, 10);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
