// The ops whose per-step data changes in a decode step (kv_write and attention over paged KV,
// gdn_sequences over state slots), each captured alone into a step graph and replayed with other
// positions, block tables and slots: the replay's results equal the eager op's bit for bit. A
// failure here names the op that is not graph-safe before the model-level test
// (graphs/step_graph_cuda_test.cpp, which needs the full build) would. Label gpu (cuda_tests).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include <string>
#include <tuple>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_backend.h"

namespace fp4serve::kernels {
namespace {

std::unique_ptr<Backend> device_or_skip() { return cuda::make_cuda_backend_if_present(); }

#define REQUIRE_DEVICE(b)                                                                              \
  if (!(b)) {                                                                                          \
    if (std::getenv("FP4SERVE_REQUIRE_CUDA") != nullptr) FAIL() << "no CUDA device (FP4SERVE_REQUIRE_CUDA)"; \
    GTEST_SKIP() << "no CUDA device";                                                                  \
  }

std::vector<uint16_t> random_bf16(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    const float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = static_cast<uint16_t>(bits >> 16);
  }
  return v;
}

std::vector<float> random_f32(std::size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

template <class T>
std::vector<T> read(Backend& b, const TensorView& v) {
  std::vector<T> out(static_cast<std::size_t>(v.bytes() / sizeof(T)));
  b.download(out.data(), v);
  return out;
}

StepLimits limits() { return StepLimits{8, 4, 4, 512}; }

TEST(CudaOpGraphs, KvWriteAndAttentionReplayWithOtherPositionsAndTablesEqualEager) {
  auto b = device_or_skip();
  REQUIRE_DEVICE(b);
  b->reserve(limits(), ModelShape{});
  std::mt19937 rng(7);
  constexpr int Hq = 8, Hkv = 2, D = 64, kBlock = 16, kBlocks = 80, S = 2;
  const std::size_t cache_elems = static_cast<std::size_t>(kBlocks) * kBlock * Hkv * D;
  DeviceBuffer kc = b->allocate(cache_elems * 2, "k cache"), vc = b->allocate(cache_elems * 2, "v cache");
  b->upload(kc.view(DType::kBF16, {static_cast<int64_t>(cache_elems)}), random_bf16(cache_elems, rng).data());
  b->upload(vc.view(DType::kBF16, {static_cast<int64_t>(cache_elems)}), random_bf16(cache_elems, rng).data());
  DeviceBuffer qb = b->allocate(S * Hq * D * 2, "q"), gb = b->allocate(S * Hq * D * 2, "gate");
  DeviceBuffer kb = b->allocate(S * Hkv * D * 2, "k"), vb = b->allocate(S * Hkv * D * 2, "v");
  DeviceBuffer ob = b->allocate(S * Hq * D * 2, "out");
  const TensorView q = qb.view(DType::kBF16, {S, Hq, D}), gate = gb.view(DType::kBF16, {S, Hq * D});
  const TensorView k = kb.view(DType::kBF16, {S, Hkv, D}), v = vb.view(DType::kBF16, {S, Hkv, D});
  const TensorView out = ob.view(DType::kBF16, {S, Hq * D});

  std::vector<AttentionSeqDesc> seqs(S);
  std::vector<std::vector<int32_t>> tables(S);
  auto place = [&](int s, int64_t pos0, int first_block) {
    tables[static_cast<std::size_t>(s)].clear();
    // 32 distinct blocks of the sequence's own half of the pool (no two rows written at once alias).
    for (int i = 0; i < 32; ++i) tables[static_cast<std::size_t>(s)].push_back(s * 40 + (first_block + 7 * i) % 40);
    KvView kv;
    kv.k = kc.data();
    kv.v = vc.data();
    kv.block_size = kBlock;
    kv.block_table = tables[static_cast<std::size_t>(s)].data();
    kv.num_table_entries = 32;
    kv.n_kv_heads = Hkv;
    kv.head_dim = D;
    seqs[static_cast<std::size_t>(s)] = {{s, 1, pos0}, kv};
  };
  auto new_inputs = [&] {
    b->upload(q, random_bf16(S * Hq * D, rng).data());
    b->upload(gate, random_bf16(S * Hq * D, rng).data());
    b->upload(k, random_bf16(S * Hkv * D, rng).data());
    b->upload(v, random_bf16(S * Hkv * D, rng).data());
  };
  auto forward = [&] {
    b->kv_write(seqs, k, v);
    b->attention(seqs, q, gate, out);
  };
  place(0, 0, 0);
  place(1, 0, 0);
  auto graph = b->capture_step(forward);
  ASSERT_NE(graph, nullptr);
  // Short and long contexts (past 256 keys both the eager op and the replay split), other tables.
  const int64_t positions[][2] = {{5, 300}, {17, 301}, {255, 40}};
  int first = 1;
  for (const auto& p : positions) {
    place(0, p[0], first);
    place(1, p[1], first + 3);
    first += 11;
    new_inputs();
    forward();  // eager (kv_write writes the same rows the replay rewrites with the same values)
    const std::vector<uint16_t> want = read<uint16_t>(*b, out);
    b->zero(out);
    b->replay_step(*graph, forward);
    EXPECT_EQ(read<uint16_t>(*b, out), want) << "positions " << p[0] << ", " << p[1];
  }
}

// Cache contents, cheaply: bf16 values of either sign in [2^-7, 1), or e4m3 codes other than NaN.
std::vector<uint16_t> cache_fill(std::size_t halfwords, bool fp8, uint32_t seed) {
  std::vector<uint16_t> v(halfwords);
  uint32_t x = seed | 1u;
  for (uint16_t& h : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    if (fp8) {
      uint8_t lo = static_cast<uint8_t>(x), hi = static_cast<uint8_t>(x >> 8);
      if ((lo & 0x7F) == 0x7F) lo ^= 1;
      if ((hi & 0x7F) == 0x7F) hi ^= 1;
      h = static_cast<uint16_t>(lo | (hi << 8));
    } else {
      h = static_cast<uint16_t>((0x3C00u + (x & 0x3FFu)) | ((x >> 16) & 1u) << 15);
    }
  }
  return v;
}

// Long-context decodes in a step graph, the model's attention heads: the device plan splits them
// over their chunks in the replays too (the counts the planning kernel wrote say so), and every
// replay with other lengths (2k .. 33k keys) and tables equals the eager op bit for bit.
class CudaLongDecodeGraphs : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CudaLongDecodeGraphs, SplitReplayWithOtherLengthsEqualsEager) {
  auto b = device_or_skip();
  REQUIRE_DEVICE(b);
  const int S = std::get<0>(GetParam());
  const bool fp8 = std::get<1>(GetParam());
  constexpr int Hq = 32, Hkv = 2, D = 256, kBlock = 64, kPerSeq = 540;  // 34560 positions a sequence
  b->reserve(StepLimits{16, 4, 4, int64_t{kPerSeq} * kBlock}, ModelShape{});
  std::mt19937 rng(13 + S);
  const std::size_t cache_elems = static_cast<std::size_t>(S) * kPerSeq * kBlock * Hkv * D;
  const std::size_t cache_bytes = cache_elems * (fp8 ? 1 : 2);
  DeviceBuffer kc = b->allocate(cache_bytes, "k cache"), vc = b->allocate(cache_bytes, "v cache");
  const int64_t halfwords = static_cast<int64_t>(cache_bytes / 2);
  b->upload(kc.view(DType::kBF16, {halfwords}), cache_fill(cache_bytes / 2, fp8, 101).data());
  b->upload(vc.view(DType::kBF16, {halfwords}), cache_fill(cache_bytes / 2, fp8, 202).data());
  DeviceBuffer qb = b->allocate(S * Hq * D * 2, "q"), gb = b->allocate(S * Hq * D * 2, "gate");
  DeviceBuffer kb = b->allocate(S * Hkv * D * 2, "k"), vb = b->allocate(S * Hkv * D * 2, "v");
  DeviceBuffer ob = b->allocate(S * Hq * D * 2, "out");
  const TensorView q = qb.view(DType::kBF16, {S, Hq, D}), gate = gb.view(DType::kBF16, {S, Hq * D});
  const TensorView k = kb.view(DType::kBF16, {S, Hkv, D}), v = vb.view(DType::kBF16, {S, Hkv, D});
  const TensorView out = ob.view(DType::kBF16, {S, Hq * D});

  std::vector<AttentionSeqDesc> seqs(static_cast<std::size_t>(S));
  std::vector<std::vector<int32_t>> tables(static_cast<std::size_t>(S));
  auto place = [&](int s, int64_t pos0, int first_block) {
    std::vector<int32_t>& t = tables[static_cast<std::size_t>(s)];
    t.clear();
    for (int i = 0; i < kPerSeq; ++i) t.push_back(s * kPerSeq + (first_block + 7 * i) % kPerSeq);  // 7 coprime to 540
    KvView kv;
    kv.dtype = fp8 ? KvDtype::kFp8E4M3 : KvDtype::kBf16;
    kv.k = kc.data();
    kv.v = vc.data();
    kv.block_size = kBlock;
    kv.block_table = t.data();
    kv.num_table_entries = kPerSeq;
    kv.n_kv_heads = Hkv;
    kv.head_dim = D;
    kv.k_scale = fp8 ? 0.05f : 1.0f;
    kv.v_scale = fp8 ? 0.03f : 1.0f;
    seqs[static_cast<std::size_t>(s)] = {{s, 1, pos0}, kv};
  };
  auto new_inputs = [&] {
    b->upload(q, random_bf16(static_cast<std::size_t>(S) * Hq * D, rng).data());
    b->upload(gate, random_bf16(static_cast<std::size_t>(S) * Hq * D, rng).data());
    b->upload(k, random_bf16(static_cast<std::size_t>(S) * Hkv * D, rng).data());
    b->upload(v, random_bf16(static_cast<std::size_t>(S) * Hkv * D, rng).data());
  };
  auto forward = [&] {
    b->kv_write(seqs, k, v);
    b->attention(seqs, q, gate, out);
  };
  auto counts = [&] {
    b->synchronize();
    cuda::attn::PlanCounts c;
    const cudaError_t e = cudaMemcpy(&c, cuda::last_attention_plan_counts(), sizeof(c), cudaMemcpyDeviceToHost);
    EXPECT_EQ(e, cudaSuccess);
    return c;
  };
  for (int s = 0; s < S; ++s) place(s, 3 + s, 0);  // captured at short contexts (fused)
  auto graph = b->capture_step(forward);
  ASSERT_NE(graph, nullptr);
  const std::vector<std::vector<int64_t>> positions =
      S == 1 ? std::vector<std::vector<int64_t>>{{2047}, {32767}, {33000}, {9000}, {100}}
             : std::vector<std::vector<int64_t>>{{2100, 33000, 700, 17000}, {32999, 2048, 30000, 5}, {40, 50, 60, 70}};
  int first = 1;
  for (const std::vector<int64_t>& p : positions) {
    std::string what = "positions";
    for (int s = 0; s < S; ++s) {
      place(s, p[static_cast<std::size_t>(s)], first + 3 * s);
      what += " " + std::to_string(p[static_cast<std::size_t>(s)]);
    }
    first += 11;
    new_inputs();
    forward();  // eager
    const std::vector<uint16_t> want = read<uint16_t>(*b, out);
    const cuda::attn::PlanCounts eager_counts = counts();
    b->zero(out);
    b->replay_step(*graph, forward);
    EXPECT_EQ(read<uint16_t>(*b, out), want) << what;
    const cuda::attn::PlanCounts replay_counts = counts();
    EXPECT_EQ(replay_counts.first, eager_counts.first) << what;
    EXPECT_EQ(replay_counts.partials, eager_counts.partials) << what;
    int split = 0;  // sequences past one chunk: all fit the budget here
    for (int64_t x : p) split += x + 1 > cuda::attn::kChunkKeys;
    // A split sequence's merge items: kv heads x query blocks (16 queries of 8).
    EXPECT_EQ(replay_counts.merge, split * Hkv * 2) << what;
    EXPECT_EQ(replay_counts.partials > 0, split > 0) << what;
    EXPECT_EQ(replay_counts.second > 0, split > 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLongDecodeGraphs,
                         ::testing::Combine(::testing::Values(1, 4), ::testing::Values(false, true)),
                         [](const auto& info) {
                           return "seqs" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_fp8" : "_bf16");
                         });

TEST(CudaOpGraphs, GdnSequenceReplayOnOtherSlotsEqualsEager) {
  auto b = device_or_skip();
  REQUIRE_DEVICE(b);
  b->reserve(limits(), ModelShape{});
  std::mt19937 rng(11);
  GdnDims d;
  d.Hk = 2, d.Hv = 4, d.dk = 32, d.dv = 32, d.conv_kernel = 4;
  const int64_t C = d.conv_dim(), S = 2;
  const auto conv_elems = static_cast<std::size_t>(d.conv_state_elems());
  const auto ssm_elems = static_cast<std::size_t>(d.state_elems());
  // Slots 0..3 eager, 4..7 replayed (the same initial values pairwise); slots 8, 9 the capture's dummies.
  constexpr int kSlots = 10;
  DeviceBuffer conv = b->allocate(kSlots * conv_elems * 2, "conv"), ssm = b->allocate(kSlots * ssm_elems * 4, "ssm");
  auto slot = [&](int i) {
    return GdnStateRef{static_cast<uint16_t*>(conv.data()) + i * conv_elems, static_cast<float*>(ssm.data()) + i * ssm_elems};
  };
  for (int i = 0; i < 4; ++i) {
    const std::vector<uint16_t> c = random_bf16(conv_elems, rng);
    const std::vector<float> s = random_f32(ssm_elems, rng, -0.5f, 0.5f);
    for (int j : {i, i + 4}) {
      b->upload(conv.view(DType::kBF16, {static_cast<int64_t>(conv_elems)}, j * conv_elems * 2), c.data());
      b->upload(ssm.view(DType::kF32, {static_cast<int64_t>(ssm_elems)}, j * ssm_elems * 4), s.data());
    }
  }
  DeviceBuffer wb = b->allocate(C * d.conv_kernel * 2, "conv weight");
  const TensorView w = wb.view(DType::kBF16, {C, d.conv_kernel});
  b->upload(w, random_bf16(static_cast<std::size_t>(C * d.conv_kernel), rng).data());
  DeviceBuffer xb = b->allocate(S * C * 2, "x"), qb = b->allocate(S * C * 2, "qkv"), cb = b->allocate(S * d.value_dim() * 2, "core");
  DeviceBuffer gb = b->allocate(S * d.Hv * 4, "g"), bb = b->allocate(S * d.Hv * 4, "beta");
  const TensorView x = xb.view(DType::kBF16, {S, C}), qkv = qb.view(DType::kBF16, {S, C});
  const TensorView core = cb.view(DType::kBF16, {S, d.value_dim()});
  const TensorView g = gb.view(DType::kF32, {S, d.Hv}), beta = bb.view(DType::kF32, {S, d.Hv});

  GdnStateRef state[S];
  int64_t pos[S] = {0, 0};
  auto forward = [&] {  // one call for both sequences, as the model makes it
    const GdnSeqDesc descs[S] = {{{0, 1, pos[0]}, state[0]}, {{1, 1, pos[1]}, state[1]}};
    b->gdn_sequences(d, w, descs, x, g, beta, qkv, core);
  };
  state[0] = slot(8), state[1] = slot(9);  // captured with scratch slots (distinct: one call)
  auto graph = b->capture_step(forward);
  ASSERT_NE(graph, nullptr);
  const int pairs[][2] = {{0, 1}, {2, 3}, {1, 0}};
  for (const auto& p : pairs) {
    b->upload(x, random_bf16(static_cast<std::size_t>(S * C), rng).data());
    b->upload(g, random_f32(static_cast<std::size_t>(S * d.Hv), rng, -2.0f, -0.1f).data());
    b->upload(beta, random_f32(static_cast<std::size_t>(S * d.Hv), rng, 0.1f, 0.9f).data());
    pos[0] = 3 + p[0];
    pos[1] = 40 + p[1];
    state[0] = slot(p[0]);
    state[1] = slot(p[1]);
    forward();
    const std::vector<uint16_t> want = read<uint16_t>(*b, core);
    state[0] = slot(p[0] + 4);
    state[1] = slot(p[1] + 4);
    b->zero(core);
    b->replay_step(*graph, forward);
    EXPECT_EQ(read<uint16_t>(*b, core), want) << "slots " << p[0] << ", " << p[1];
  }
  // The states went through the same updates: eager slots == replayed slots.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(read<uint16_t>(*b, conv.view(DType::kBF16, {static_cast<int64_t>(conv_elems)}, i * conv_elems * 2)),
              read<uint16_t>(*b, conv.view(DType::kBF16, {static_cast<int64_t>(conv_elems)}, (i + 4) * conv_elems * 2)))
        << "conv state " << i;
    EXPECT_EQ(read<float>(*b, ssm.view(DType::kF32, {static_cast<int64_t>(ssm_elems)}, i * ssm_elems * 4)),
              read<float>(*b, ssm.view(DType::kF32, {static_cast<int64_t>(ssm_elems)}, (i + 4) * ssm_elems * 4)))
        << "recurrent state " << i;
  }
}

}  // namespace
}  // namespace fp4serve::kernels
