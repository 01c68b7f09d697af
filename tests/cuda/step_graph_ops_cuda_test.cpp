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
  // Short and long contexts (past 256 keys the eager op splits, the graph's is fused), other tables.
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
