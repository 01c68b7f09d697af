// The CUDA Gated DeltaNet on the CPU, without a GPU: the launch plan and argument checks
// (gdn_plan.h), and the kernels' per-thread bodies (gdn_device.cuh, gdn_chunked.cuh, compiled here
// by g++) run thread by thread in the kernels' phase order -- conv threads, then the state shift
// and l2norm threads, then per rule block the lanes' column load and, per token, every lane's
// staging before any lane's column update (the chunked rule: each phase of each chunk) -- against
// the CPU op: bit for bit, or within an NMSE for the opt-in chunked rule. Threads of one phase run
// in reverse order, so a body that depended on another thread of its phase having run first would
// show here. The device's own math (exp/log1p in double, expf, the _rn intrinsics) and the
// __syncthreads placement are the GPU run's to check.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/gdn_cpu.h"
#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/gdn_device.cuh"
#include "kernels/cuda/gdn_plan.h"

namespace fp4serve::kernels::cuda {
namespace {

using namespace gdn_device;

uint32_t fbits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

GdnDims dims(int Hk, int Hv, int dk, int dv, int Kc = 4) {
  GdnDims d;
  d.Hk = Hk, d.Hv = Hv, d.dk = dk, d.dv = dv, d.conv_kernel = Kc;
  return d;
}

// gdn_cuda.cu's gdn_rule_kernel<kDk> on the host, block by block, lane by lane in each phase.
template <int kDk>
void emulate_rule(const RuleArgs& base, const GdnSeqDev* seqs, const GdnLaunch& p) {
  const int dk = base.dk;
  for (int bx = static_cast<int>(p.rule_heads) - 1; bx >= 0; --bx)
    for (int tile = static_cast<int>(p.rule_tiles) - 1; tile >= 0; --tile) {
      const GdnSeqDev s = seqs[bx / base.Hv];
      if (s.rows == 0 || s.chunked) continue;
      const RuleArgs a = rule_for(base, s);
      const int h = bx % base.Hv;
      std::vector<float> smem(p.rule_smem / sizeof(float), std::nanf(""));
      float* qk = smem.data() + dk * kRuleCols;
      float* qs[2] = {qk, qk + dk};
      float* ks[2] = {qk + 2 * dk, qk + 3 * dk};
      RuleLane lanes[kRuleCols];
      TokenIn cur[kRuleCols], nxt[kRuleCols];
      float kvm[kRuleCols];
      auto col = [&](int lane) { return smem.data() + lane; };
      for (int lane = kRuleCols - 1; lane >= 0; --lane) {
        lanes[lane] = rule_lane(a, h, tile, lane);
        rule_load_column<kDk>(a, lanes[lane], col(lane));
        cur[lane] = rule_load_token<kDk>(a, lanes[lane], 0);
        nxt[lane] = a.rows > 1 ? rule_load_token<kDk>(a, lanes[lane], 1) : cur[lane];
        rule_stage<kDk>(a, lanes[lane], cur[lane], qs[0], ks[0]);
      }
      // __syncthreads()
      for (int lane = kRuleCols - 1; lane >= 0; --lane)
        kvm[lane] = rule_decay_project<kDk>(a, cur[lane].decay, col(lane), ks[0]);
      for (int64_t t = 0; t < a.rows; ++t) {
        const bool next = t + 1 < a.rows;
        const int b = static_cast<int>(t & 1), nb = b ^ 1;
        TokenIn fut[kRuleCols];
        for (int lane = kRuleCols - 1; lane >= 0; --lane) {
          if (next) rule_stage<kDk>(a, lanes[lane], nxt[lane], qs[nb], ks[nb]);
          fut[lane] = t + 2 < a.rows ? rule_load_token<kDk>(a, lanes[lane], t + 2) : nxt[lane];
        }
        // __syncthreads()
        for (int lane = kRuleCols - 1; lane >= 0; --lane)
          kvm[lane] = rule_update<kDk>(a, lanes[lane], cur[lane], kvm[lane], t, col(lane), qs[b], ks[b], next,
                                       nxt[lane].decay, ks[nb]);
        // __syncthreads()
        for (int lane = 0; lane < kRuleCols; ++lane) cur[lane] = nxt[lane], nxt[lane] = fut[lane];
      }
      for (int lane = kRuleCols - 1; lane >= 0; --lane) rule_store_column<kDk>(a, lanes[lane], col(lane));
    }
}

// gdn_chunked.cu's kernel on the host, block by block, the threads of each phase in reverse order.
void emulate_chunked(const RuleArgs& a, const GdnLaunch& p) {
  const unsigned heads = static_cast<unsigned>(a.Hv);
  using namespace gdn_chunked;
  const ChunkLayout lay = chunk_layout(a.dk);
  ASSERT_EQ(p.chunk_smem, lay.bytes);
  ASSERT_LE(lay.bytes, kMaxSmemPerBlockSm120);
  const int tile_elems = a.dk * kRuleCols;
  auto each = [](int n, auto&& body) {
    for (int idx = (n + kChunkThreads - 1) / kChunkThreads * kChunkThreads - 1; idx >= 0; --idx)
      if (idx < n) body(idx);
  };
  for (int h = static_cast<int>(heads) - 1; h >= 0; --h)
    for (int tile = static_cast<int>(p.rule_tiles) - 1; tile >= 0; --tile) {
      std::vector<float> smem(lay.bytes / sizeof(float), std::nanf(""));
      Chunk c = chunk_at(smem.data(), lay, a, h, tile);
      each(tile_elems, [&](int idx) { chunk_load_state(a, c, idx); });
      for (int64_t t0 = 0; t0 < a.rows; t0 += kGdnChunk) {
        c.t0 = t0;
        c.L = static_cast<int>(std::min<int64_t>(kGdnChunk, a.rows - t0));
        each(c.L * std::max(c.dk, kRuleCols), [&](int idx) { chunk_load(a, c, idx); });
        chunk_cumsum(c);
        each(c.L * std::max(c.L, kRuleCols), [&](int idx) { chunk_scores(a, c, idx); });
        for (int col = kRuleCols - 1; col >= 0; --col) chunk_solve(c, col);
        each(c.L * kRuleCols, [&](int idx) { chunk_out(a, c, idx); });
        each(tile_elems, [&](int idx) { chunk_state(c, idx); });
      }
      each(tile_elems, [&](int idx) { chunk_store_state(a, c, idx); });
    }
}

// gdn_cuda.cu's gdn_sequences on the host: the descs' rows of the step's x [T, ldx] and g, beta
// [T, Hv], into qkv [T, ldq] and core [T, ldo]; the descs' conv and ssm states in place. The
// kernels read the descs from gdn_stage's bytes, as on the device.
void emulate_sequences(const GdnDims& d, const uint16_t* w, const uint16_t* x, int64_t ldx, int64_t T,
                       std::span<const GdnSeqDesc> descs, const float* g, const float* beta, uint16_t* qkv,
                       int64_t ldq, uint16_t* core, int64_t ldo, bool chunked_opt_in = false) {
  const int64_t N = static_cast<int64_t>(descs.size());
  const GdnLaunch p = gdn_plan(d, N, T);
  std::vector<std::byte> staged;
  gdn_stage(d, descs, T, chunked_opt_in, kMaxSmemPerBlockSm120, staged);
  ASSERT_EQ(staged.size(), N * sizeof(GdnSeqDev) + T * sizeof(int32_t));
  std::vector<GdnSeqDev> seqs(static_cast<std::size_t>(N));
  std::vector<int32_t> row_seq(static_cast<std::size_t>(T));
  std::memcpy(seqs.data(), staged.data(), N * sizeof(GdnSeqDev));
  std::memcpy(row_seq.data(), staged.data() + N * sizeof(GdnSeqDev), T * sizeof(int32_t));
  const int64_t C = d.conv_dim();
  std::vector<float> inv(static_cast<std::size_t>(p.inv_floats), std::nanf(""));
  std::vector<float> decay(static_cast<std::size_t>(p.decay_floats), std::nanf(""));
  const ConvArgs cp{x, ldx, T, C, w, d.conv_kernel, nullptr, qkv, ldq, d.Hk, d.dk, inv.data(), g, d.Hv, d.Hv,
                    decay.data()};
  for (int64_t n = static_cast<int64_t>(p.conv_blocks) * kGdnThreads - 1; n >= 0; --n)
    conv_thread(cp, seqs.data(), row_seq.data(), n);
  const int64_t state_blocks = p.state_blocks, norm_blocks = p.norm_blocks;
  for (int64_t blk = state_blocks + norm_blocks + p.decay_blocks - 1; blk >= 0; --blk)
    for (int64_t th = kGdnThreads - 1; th >= 0; --th) {
      if (blk < state_blocks)
        shift_thread(cp, seqs.data(), N, blk * kGdnThreads + th);
      else if (blk < state_blocks + norm_blocks)
        norm_thread(cp, seqs.data(), row_seq.data(), (blk - state_blocks) * kGdnThreads + th);
      else
        decay_thread(cp, seqs.data(), row_seq.data(), (blk - state_blocks - norm_blocks) * kGdnThreads + th);
    }
  RuleArgs a{};
  a.qkv = qkv, a.ldq = ldq;
  a.g = g, a.ldg = d.Hv;
  a.decay = decay.data();
  a.beta = beta, a.ldb = d.Hv;
  a.inv = inv.data();
  a.S = nullptr;
  a.out = core, a.ldo = ldo;
  a.rows = T;
  a.Hk = d.Hk, a.Hv = d.Hv, a.dk = d.dk, a.dv = d.dv;
  a.qscale = p.qscale;
  ASSERT_EQ(p.rule_smem, static_cast<std::size_t>(d.dk) * (kRuleCols + 4) * sizeof(float));
  ASSERT_EQ(p.rule_unrolled, d.dk == kGdnUnrolledDk);
  ASSERT_EQ(p.rule_heads, static_cast<unsigned>(N * d.Hv));
  if (p.rule_unrolled)
    emulate_rule<kGdnUnrolledDk>(a, seqs.data(), p);
  else
    emulate_rule<0>(a, seqs.data(), p);
  for (const GdnSeqDev& s : seqs)
    if (s.chunked) emulate_chunked(rule_for(a, s), p);
}

// One sequence's rows [r0, r0 + rows) through a one-desc call.
void emulate_sequence(const GdnDims& d, const uint16_t* w, const uint16_t* x, int64_t ldx, int64_t T, int64_t r0,
                      int64_t rows, const float* g, const float* beta, uint16_t* conv, float* ssm, uint16_t* qkv,
                      int64_t ldq, uint16_t* core, int64_t ldo, bool chunked_opt_in = false) {
  const GdnSeqDesc desc{{r0, rows, 0}, {conv, ssm}};
  emulate_sequences(d, w, x, ldx, T, std::span<const GdnSeqDesc>(&desc, 1), g, beta, qkv, ldq, core, ldo,
                    chunked_opt_in);
}

struct Case {
  GdnDims d;
  int64_t rows;
  std::vector<int64_t> split;  // pieces of the emulated run (the last takes the rest)
  int64_t pad = 0;             // extra elements per row of x, qkv and core (strided rows)
};

double nmse(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) num += (out[i] - ref[i]) * (out[i] - ref[i]), den += ref[i] * ref[i];
  return den > 0.0 ? num / den : num;
}

// The emulated kernels against the CPU op: the conv output and conv state bit for bit; the core
// output and the recurrent state bit for bit from the recurrent rule, or (chunked) within
// max_nmse, whose measured values land in *nmse_core, *nmse_ssm.
void check_against_cpu(const Case& c, uint32_t seed, bool chunked = false, double max_nmse = 0.0,
                       double* nmse_core = nullptr, double* nmse_ssm = nullptr) {
  const GdnDims& d = c.d;
  const int64_t T = c.rows, C = d.conv_dim(), Vd = d.value_dim(), Kc = d.conv_kernel;
  const int64_t ldx = C + c.pad, ldq = C + c.pad, ldo = Vd + c.pad;
  const auto x = test::to_bf16(test::random_f32(T * C, seed));
  const auto w = test::to_bf16(test::random_f32(C * Kc, seed + 1, 0.5f));
  const auto conv0 = test::to_bf16(test::random_f32(d.conv_state_elems(), seed + 2));
  const auto ssm0 = test::random_f32(d.state_elems(), seed + 3, 0.1f);
  const auto r = test::random_f32(T * d.Hv, seed + 4);
  std::vector<float> g, beta;
  for (float v : r) {
    g.push_back(-0.3f * std::fabs(v));
    beta.push_back(round_bf16(1.0f / (1.0f + std::exp(-2.0f * v))));
  }
  // The CPU op (scalar tier: the reference of every tier).
  std::vector<uint16_t> conv_ref = conv0, qkv_ref(T * C), core_ref(T * Vd);
  std::vector<float> ssm_ref = ssm0;
  kernels::gdn_conv1d(x.data(), T, C, w.data(), d.conv_kernel, conv_ref.data(), qkv_ref.data(), cpu::Isa::kScalar);
  kernels::gdn_recurrent(qkv_ref.data(), T, d, g.data(), beta.data(), ssm_ref.data(), core_ref.data(), cpu::Isa::kScalar);
  // The kernels' bodies, on strided copies, piece by piece.
  std::vector<uint16_t> xs(T * ldx, 0x7FC1), qkv(T * ldq, 0x7FC1), core(T * ldo, 0x7FC1), conv = conv0;
  for (int64_t t = 0; t < T; ++t) std::copy_n(x.begin() + t * C, C, xs.begin() + t * ldx);
  std::vector<float> ssm = ssm0;
  int64_t done = 0;
  for (std::size_t piece = 0; done < T; ++piece) {
    const int64_t m = piece < c.split.size() ? std::min(c.split[piece], T - done) : T - done;
    emulate_sequence(d, w.data(), xs.data(), ldx, T, done, m, g.data(), beta.data(), conv.data(), ssm.data(),
                     qkv.data(), ldq, core.data(), ldo, chunked);
    done += m;
  }
  std::vector<double> core_v, core_ref_v, ssm_v(ssm.begin(), ssm.end()), ssm_ref_v(ssm_ref.begin(), ssm_ref.end());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < C; ++i) ASSERT_EQ(qkv[t * ldq + i], qkv_ref[t * C + i]) << "qkv row " << t << " ch " << i;
    for (int64_t i = 0; i < Vd; ++i) {
      if (!chunked) ASSERT_EQ(core[t * ldo + i], core_ref[t * Vd + i]) << "core row " << t << " col " << i;
      core_v.push_back(bf16_bits_to_f32(core[t * ldo + i]));
      core_ref_v.push_back(bf16_bits_to_f32(core_ref[t * Vd + i]));
    }
    for (int64_t i = 0; i < c.pad; ++i) {  // the padding of strided rows untouched
      ASSERT_EQ(qkv[t * ldq + C + i], 0x7FC1);
      ASSERT_EQ(core[t * ldo + Vd + i], 0x7FC1);
    }
  }
  ASSERT_EQ(conv, conv_ref);
  if (!chunked) {
    for (std::size_t i = 0; i < ssm.size(); ++i) ASSERT_EQ(fbits(ssm[i]), fbits(ssm_ref[i])) << i;
    return;
  }
  const double e_core = nmse(core_v, core_ref_v), e_ssm = nmse(ssm_v, ssm_ref_v);
  EXPECT_LE(e_core, max_nmse);
  EXPECT_LE(e_ssm, max_nmse);
  if (nmse_core) *nmse_core = e_core;
  if (nmse_ssm) *nmse_ssm = e_ssm;
}

TEST(CudaGdn, KernelBodiesReproduceTheCpuOpBitForBit) {
  const Case cases[] = {
      {dims(2, 4, 32, 32), 7, {}},
      {dims(2, 4, 32, 32), 7, {1, 2, 1}},  // pieces shorter than the conv history (state shifts in place)
      {dims(1, 2, 24, 40), 5, {4}, 8},     // dk < 32 lanes, dv across two column tiles, strided rows
      {dims(1, 1, 64, 16, 2), 3, {}},      // conv kernel 2
      {dims(1, 2, 16, 16, 1), 3, {1}},     // conv kernel 1: no history
      {dims(1, 2, 256, 8), 2, {1}},        // the largest dk the rule takes
      {dims(16, 32, 128, 128), 3, {1}},    // the model's heads (the rule's unrolled instance)
      {dims(1, 2, 128, 128), 70, {33}},    // the model's head sizes over a longer prefill
      {dims(2, 2, 128, 40), 4, {}, 8},     // the unrolled instance with a partial column tile, strided
  };
  uint32_t seed = 5;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "Hk=" << c.d.Hk << " Hv=" << c.d.Hv << " dk=" << c.d.dk << " dv=" << c.d.dv
                                    << " Kc=" << c.d.conv_kernel << " rows=" << c.rows);
    check_against_cpu(c, seed += 10);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// Several sequences of different lengths (one without rows, step rows of no sequence between them)
// in one call: each sequence's outputs and states bit for bit those of the CPU op on it alone.
TEST(CudaGdn, BatchedCallGivesEachSequenceItsOwnBits) {
  for (const GdnDims& d : {dims(2, 4, 32, 40), dims(1, 2, 128, 128)}) {
    SCOPED_TRACE(testing::Message() << "dk=" << d.dk << " dv=" << d.dv);
    const int64_t C = d.conv_dim(), Vd = d.value_dim(), T = 14;
    struct Seq {
      int64_t row0, rows;
    };
    const Seq seqs[] = {{9, 4}, {0, 1}, {2, 0}, {3, 5}, {13, 1}};  // rows 1, 2 and 8 belong to none
    const auto x = test::to_bf16(test::random_f32(T * C, 3));
    const auto w = test::to_bf16(test::random_f32(C * d.conv_kernel, 4, 0.5f));
    const auto r = test::random_f32(T * d.Hv, 5);
    std::vector<float> g, beta;
    for (float v : r) {
      g.push_back(-0.3f * std::fabs(v));
      beta.push_back(round_bf16(1.0f / (1.0f + std::exp(-2.0f * v))));
    }
    std::vector<std::vector<uint16_t>> conv;
    std::vector<std::vector<float>> ssm;
    std::vector<GdnSeqDesc> descs;
    for (std::size_t i = 0; i < std::size(seqs); ++i) {
      conv.push_back(test::to_bf16(test::random_f32(d.conv_state_elems(), 10 + static_cast<uint32_t>(i))));
      ssm.push_back(test::random_f32(d.state_elems(), 20 + static_cast<uint32_t>(i), 0.1f));
    }
    const auto conv0 = conv;
    const auto ssm0 = ssm;
    for (std::size_t i = 0; i < std::size(seqs); ++i)
      descs.push_back({{seqs[i].row0, seqs[i].rows, 0}, {conv[i].data(), ssm[i].data()}});
    std::vector<uint16_t> qkv(T * C, 0x7FC1), core(T * Vd, 0x7FC1);
    emulate_sequences(d, w.data(), x.data(), C, T, descs, g.data(), beta.data(), qkv.data(), C, core.data(), Vd);
    if (testing::Test::HasFatalFailure()) return;
    std::vector<bool> covered(T, false);
    for (std::size_t i = 0; i < std::size(seqs); ++i) {
      const int64_t r0 = seqs[i].row0, m = seqs[i].rows;
      std::vector<uint16_t> conv_ref = conv0[i], qkv_ref(m * C), core_ref(m * Vd);
      std::vector<float> ssm_ref = ssm0[i];
      kernels::gdn_conv1d(x.data() + r0 * C, m, C, w.data(), d.conv_kernel, conv_ref.data(), qkv_ref.data(),
                          cpu::Isa::kScalar);
      kernels::gdn_recurrent(qkv_ref.data(), m, d, g.data() + r0 * d.Hv, beta.data() + r0 * d.Hv, ssm_ref.data(),
                             core_ref.data(), cpu::Isa::kScalar);
      ASSERT_EQ(conv[i], conv_ref) << "sequence " << i;
      for (std::size_t e = 0; e < ssm_ref.size(); ++e) ASSERT_EQ(fbits(ssm[i][e]), fbits(ssm_ref[e])) << i << " " << e;
      ASSERT_TRUE(std::equal(qkv_ref.begin(), qkv_ref.end(), qkv.begin() + r0 * C)) << "sequence " << i;
      ASSERT_TRUE(std::equal(core_ref.begin(), core_ref.end(), core.begin() + r0 * Vd)) << "sequence " << i;
      for (int64_t t = r0; t < r0 + m; ++t) covered[t] = true;
    }
    for (int64_t t = 0; t < T; ++t)  // rows of no sequence: untouched
      if (!covered[t]) {
        ASSERT_EQ(qkv[t * C], 0x7FC1) << t;
        ASSERT_EQ(core[t * Vd], 0x7FC1) << t;
      }
  }
}

// The staged bytes: the descs as given, the row map naming each row's desc (-1: none).
TEST(CudaGdn, StagedDescsMapEveryRowToItsSequence) {
  const GdnDims d = dims(1, 2, 128, 128);
  float s0 = 0, s1 = 0;
  uint16_t c0 = 0, c1 = 0;
  const GdnSeqDesc descs[] = {{{3, 2, 7}, {&c0, &s0}}, {{5, kGdnChunk, 0}, {&c1, &s1}}};
  const int64_t T = kGdnChunk + 7;
  std::vector<std::byte> staged;
  gdn_stage(d, descs, T, true, kMaxSmemPerBlockSm120, staged);
  ASSERT_EQ(staged.size(), 2 * sizeof(GdnSeqDev) + T * sizeof(int32_t));
  GdnSeqDev dev[2];
  std::memcpy(dev, staged.data(), sizeof dev);
  EXPECT_EQ(dev[0].row0, 3);
  EXPECT_EQ(dev[0].rows, 2);
  EXPECT_EQ(dev[0].chunked, 0);
  EXPECT_EQ(dev[0].state.ssm, &s0);
  EXPECT_EQ(dev[0].state.conv, &c0);
  EXPECT_EQ(dev[1].row0, 5);
  EXPECT_EQ(dev[1].chunked, 1);  // kGdnChunk rows, opted in
  std::vector<int32_t> map(static_cast<std::size_t>(T));
  std::memcpy(map.data(), staged.data() + sizeof dev, map.size() * sizeof(int32_t));
  for (int64_t r = 0; r < T; ++r) {
    const int32_t want = r >= 3 && r < 5 ? 0 : r >= 5 && r < 5 + kGdnChunk ? 1 : -1;
    EXPECT_EQ(map[r], want) << "row " << r;
  }
}

// The chunked rule (opt-in): within the exact-math NMSE of the op harness (1e-7) of the CPU op,
// over whole chunks, a partial last chunk, and a prefill split across calls; calls shorter than a
// chunk take the recurrent rule (bits). Measured: core output and state NMSE around 1e-13.
TEST(CudaGdn, ChunkedBodiesStayWithinTheNmseOfTheCpuOp) {
  const Case cases[] = {
      {dims(1, 2, 128, 128), 64, {}},        // one whole chunk at the model's head sizes
      {dims(1, 2, 128, 40), 150, {}, 8},     // chunks of 64, 64, 22; a partial column tile; strided rows
      {dims(2, 4, 32, 32), 200, {70, 5}},    // a split prefill; the 5-row piece runs recurrent
  };
  uint32_t seed = 77;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "Hk=" << c.d.Hk << " Hv=" << c.d.Hv << " dk=" << c.d.dk << " dv=" << c.d.dv
                                    << " rows=" << c.rows);
    double e_core = -1.0, e_ssm = -1.0;
    check_against_cpu(c, seed += 10, true, 1e-7, &e_core, &e_ssm);
    if (testing::Test::HasFatalFailure()) return;
    EXPECT_GT(e_core, 0.0);  // it does reassociate: not the recurrent rule in disguise
    std::printf("chunked rule: core nmse %.3g, state nmse %.3g\n", e_core, e_ssm);
  }
  const std::size_t optin = kMaxSmemPerBlockSm120;
  EXPECT_FALSE(gdn_takes_chunked(dims(1, 2, 128, 128), kGdnChunk - 1, true, optin));
  EXPECT_FALSE(gdn_takes_chunked(dims(1, 2, 256, 128), kGdnChunk, true, optin));  // above kGdnChunkMaxDk
  EXPECT_FALSE(gdn_takes_chunked(dims(1, 2, 128, 128), 1000, false, optin));
  EXPECT_FALSE(gdn_takes_chunked(dims(1, 2, 128, 128), 1000, true, 48 * 1024));  // no room for the block
  EXPECT_TRUE(gdn_takes_chunked(dims(16, 32, 128, 128), kGdnChunk, true, optin));
  EXPECT_LE(gdn_plan(dims(16, 32, 128, 128), 1, kGdnChunk).chunk_smem, kMaxSmemPerBlockSm120);
}

TEST(CudaGdn, GatingBodyReproducesTheCpuOp) {
  const int64_t T = 9;
  const int Hv = 8;
  const auto a = test::random_bf16_values(T * Hv, 1, 12.0f);  // some a + dt_bias above softplus's 20
  const auto b = test::random_bf16_values(T * Hv, 2, 3.0f);
  const auto A_log = test::random_bf16_values(Hv, 3), dt = test::random_bf16_values(Hv, 4, 2.0f);
  std::vector<float> g_ref(T * Hv), beta_ref(T * Hv), g(T * Hv * 2, -1.0f), beta(T * Hv * 2, -1.0f);
  kernels::gdn_gating(a.data(), b.data(), A_log.data(), dt.data(), T, Hv, g_ref.data(), beta_ref.data());
  const GatingArgs p{a.data(), Hv, b.data(), Hv, A_log.data(), dt.data(), T, Hv, g.data(), 2 * Hv, beta.data(), 2 * Hv};
  for (int64_t n = T * Hv - 1; n >= 0; --n) gating_element(p, n);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < Hv; ++h) {
      EXPECT_EQ(fbits(g[t * 2 * Hv + h]), fbits(g_ref[t * Hv + h])) << t << " " << h;
      EXPECT_EQ(fbits(beta[t * 2 * Hv + h]), fbits(beta_ref[t * Hv + h])) << t << " " << h;
      EXPECT_EQ(g[t * 2 * Hv + Hv + h], -1.0f);  // between the strided rows: untouched
    }
}

TEST(CudaGdn, PlanCoversEveryThreadAndFitsSharedMemory) {
  const GdnDims d = dims(16, 32, 128, 128);
  for (const auto& [seqs, rows] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {64, 64}, {1, 4097}, {256, 256}}) {
    const GdnLaunch p = gdn_plan(d, seqs, rows);
    EXPECT_GE(static_cast<int64_t>(p.conv_blocks) * kGdnThreads, rows * d.conv_dim());
    EXPECT_LT(static_cast<int64_t>(p.conv_blocks - 1) * kGdnThreads, rows * d.conv_dim());
    EXPECT_GE(static_cast<int64_t>(p.state_blocks) * kGdnThreads, seqs * d.conv_dim());
    EXPECT_GE(static_cast<int64_t>(p.norm_blocks) * kGdnThreads, rows * 2 * d.Hk);
    EXPECT_GE(static_cast<int64_t>(p.decay_blocks) * kGdnThreads, rows * d.Hv);
    EXPECT_EQ(p.decay_floats, rows * 32);
    EXPECT_EQ(p.rule_heads, static_cast<unsigned>(seqs * 32));
    EXPECT_EQ(p.rule_tiles, 4u);
    EXPECT_EQ(p.inv_floats, rows * 32);
    EXPECT_LE(p.rule_smem, kMaxSmemDefault);  // no opt-in needed on either architecture
  }
  EXPECT_TRUE(gdn_plan(d, 1, 1).rule_unrolled);
  EXPECT_FALSE(gdn_plan(dims(1, 2, 24, 40), 1, 1).rule_unrolled);
  EXPECT_EQ(gdn_plan(dims(1, 2, 24, 40), 1, 1).rule_tiles, 2u);
  EXPECT_EQ(gdn_plan(d, 1, 1).qscale, static_cast<float>(1.0 / std::sqrt(128.0)));
}

TEST(CudaGdn, DimsAndStridesTheKernelsCannotTakeAreRejected) {
  EXPECT_NO_THROW(gdn_check_dims(dims(16, 32, 128, 128), "op"));
  EXPECT_THROW(gdn_check_dims(dims(3, 4, 32, 32), "op"), std::invalid_argument);     // Hv not a multiple of Hk
  EXPECT_THROW(gdn_check_dims(dims(0, 4, 32, 32), "op"), std::invalid_argument);
  EXPECT_THROW(gdn_check_dims(dims(1, 1, 257, 32), "op"), std::invalid_argument);    // dk above kGdnMaxDk
  EXPECT_THROW(gdn_check_dims(dims(1, 1, 32, 0), "op"), std::invalid_argument);
  EXPECT_THROW(gdn_check_dims(dims(1, 1, 32, 32, 0), "op"), std::invalid_argument);
  EXPECT_THROW(gdn_check_dims(dims(1, 1, 32, 32, 17), "op"), std::invalid_argument);
  int dummy = 0;
  TensorView v = TensorView::contiguous(&dummy, DType::kF32, {4, 8});
  EXPECT_EQ(gdn_row_stride(v, "v"), 8);
  v.stride[0] = 12;
  EXPECT_EQ(gdn_row_stride(v, "v"), 12);
  v.stride[0] = 7;
  EXPECT_THROW(gdn_row_stride(v, "v"), std::invalid_argument);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
