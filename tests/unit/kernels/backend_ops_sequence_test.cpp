// The backend op harness (backend_ops_harness.h) on the per-sequence ops: kv_write and attention
// (bf16 and fp8 KV, contiguous and paged caches, both AttentionMath, GQA, prefill, decode and mixed
// steps at several pos0) and gdn_sequences (several sequences, prefills split at several points),
// plus batch invariance on every backend: a sequence's rows computed with others, or alone, or a
// token at a time, or its prefill split anywhere, give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention_cpu.h"

namespace fp4serve::kernels::test::ops {
namespace {

// ---- KV write and attention ---------------------------------------------------------------------

struct AttnShape {
  int Hq, Hkv, D;
  KvDtype kv;
  int64_t block;                                  // 0: one contiguous cache per sequence
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (pos0, new rows) of each sequence in the step
  float k_mag = 1.0f;                             // spread of k (30: fp8 codes saturate at 448)
};

std::string describe(const AttnShape& s) {
  std::string seqs;
  for (auto [p, n] : s.seqs) seqs += cat(seqs.empty() ? "" : ",", p, "+", n);
  return cat("Hq=", s.Hq, " Hkv=", s.Hkv, " D=", s.D, s.kv == KvDtype::kBf16 ? " bf16" : " fp8",
             s.block ? cat(" paged/", s.block) : std::string(" contiguous"), " pos0+T=", seqs,
             s.k_mag != 1.0f ? cat(" |k|x", s.k_mag) : std::string());
}

// One step on a backend: caches filled with NaN codes (a read of an unwritten row shows), every
// sequence's history written, q/gate/k/v of the step's rows uploaded; the step's own kv_write is
// the caller's (it is the op under test).
struct AttnStep {
  DeviceTensor kc, vc, q, gate, k, v;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeqDesc> descs;
  int64_t rows = 0;
  float k_scale = 1.0f, v_scale = 1.0f;
};

AttnStep prepare_step(Backend& b, const AttnShape& s, uint32_t seed) {
  AttnStep st;
  const bool fp8 = s.kv == KvDtype::kFp8E4M3;
  const DType kvt = fp8 ? DType::kF8E4M3 : DType::kBF16;
  if (fp8) st.k_scale = 0.05f, st.v_scale = 0.03f;
  const int64_t row = int64_t(s.Hkv) * s.D;
  int64_t cache_rows = 0;
  for (auto [p, n] : s.seqs) {
    st.rows += n;
    cache_rows += s.block ? (p + n + s.block - 1) / s.block * s.block : p + n + 2;
  }
  if (s.block) cache_rows += 2 * s.block;  // blocks no sequence owns
  const std::size_t cache_elems = static_cast<std::size_t>(cache_rows * row);
  const std::vector<uint16_t> nan16(cache_elems, 0x7FC0);
  const std::vector<uint8_t> nan8(cache_elems, 0x7F);
  const void* nan = fp8 ? static_cast<const void*>(nan8.data()) : nan16.data();
  const std::size_t cache_bytes = cache_elems * dtype_size(kvt);
  st.kc = upload(b, kvt, {cache_rows, s.Hkv, s.D}, nan, cache_bytes, "k cache");
  st.vc = upload(b, kvt, {cache_rows, s.Hkv, s.D}, nan, cache_bytes, "v cache");
  // Paged: the pool's blocks handed out in a shuffled order.
  std::vector<int32_t> free_blocks(static_cast<std::size_t>(s.block ? cache_rows / s.block : 0));
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(seed));
  st.tables.resize(s.seqs.size());
  int64_t row0 = 0, region = 0;
  for (std::size_t i = 0; i < s.seqs.size(); ++i) {
    const auto [pos0, n] = s.seqs[i];
    KvView kv;
    kv.dtype = s.kv;
    kv.n_kv_heads = s.Hkv;
    kv.head_dim = s.D;
    kv.k_scale = st.k_scale;
    kv.v_scale = st.v_scale;
    if (s.block) {
      const int64_t blocks = (pos0 + n + s.block - 1) / s.block;
      st.tables[i].assign(free_blocks.end() - blocks, free_blocks.end());
      free_blocks.resize(free_blocks.size() - static_cast<std::size_t>(blocks));
      kv.k = st.kc.view.data;
      kv.v = st.vc.view.data;
      kv.block_size = s.block;
      kv.block_table = st.tables[i].data();
      kv.num_table_entries = blocks;
    } else {
      kv.k = st.kc.view.rows(region, 1).data;
      kv.v = st.vc.view.rows(region, 1).data;
      kv.capacity = pos0 + n + 2;
      region += kv.capacity;
    }
    st.descs.push_back({{row0, n, pos0}, kv});
    row0 += n;
    if (pos0 > 0) {  // the sequence's cached tokens, written as an earlier step would have
      const uint32_t hs = seed + 100 + static_cast<uint32_t>(i);
      DeviceTensor kh =
          upload(b, DType::kBF16, {pos0, s.Hkv, s.D}, to_bf16(random_f32(pos0 * row, hs, s.k_mag)), "k history");
      DeviceTensor vh =
          upload(b, DType::kBF16, {pos0, s.Hkv, s.D}, to_bf16(random_f32(pos0 * row, hs + 50)), "v history");
      const AttentionSeqDesc hist{{0, pos0, 0}, kv};
      b.kv_write({&hist, 1}, kh.view, vh.view);
    }
  }
  const int64_t T = st.rows;
  st.q = upload(b, DType::kBF16, {T, s.Hq, s.D}, to_bf16(random_f32(T * s.Hq * s.D, seed + 1, 2.0f)), "q");
  st.gate =
      upload(b, DType::kBF16, {T, int64_t(s.Hq) * s.D}, to_bf16(random_f32(T * s.Hq * s.D, seed + 2, 2.0f)), "gate");
  st.k = upload(b, DType::kBF16, {T, s.Hkv, s.D}, to_bf16(random_f32(T * row, seed + 3, s.k_mag)), "k");
  st.v = upload(b, DType::kBF16, {T, s.Hkv, s.D}, to_bf16(random_f32(T * row, seed + 4)), "v");
  return st;
}

Output run_attention(Backend& b, AttnStep& st, std::span<const AttentionSeqDesc> descs, AttentionMath math) {
  DeviceTensor out = alloc(b, DType::kBF16, {st.rows, st.gate.view.dim(1)}, "out");
  b.attention(descs, st.q.view, st.gate.view, out.view, math);
  Output o = download(b, out.view, "out");
  for (std::size_t i = 0; i < o.values.size(); ++i)  // rows the step covers read written keys only
    if (!std::isfinite(o.values[i])) throw std::runtime_error(cat("attention: non-finite output at ", i));
  return o;
}

std::vector<AttnShape> attention_shapes() {
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> steps = {
      {{0, 7}},                    // a prefill
      {{5, 1}, {0, 4}, {37, 3}},   // decode, prefill and a chunked prefill's continuation together
      {{63, 1}, {16, 1}, {1, 1}},  // decodes on and next to block boundaries
  };
  std::vector<AttnShape> out;
  for (KvDtype kv : {KvDtype::kBf16, KvDtype::kFp8E4M3})
    for (int64_t block : {0, 16})
      for (const auto& seqs : steps) out.push_back({4, 2, 64, kv, block, seqs});
  out.push_back({8, 1, 32, KvDtype::kBf16, 16, {{20, 2}, {3, 5}}});    // 8 q heads per kv head
  out.push_back({16, 2, 256, KvDtype::kBf16, 16, {{40, 1}, {0, 3}}});  // the model's heads
  out.push_back({4, 2, 64, KvDtype::kFp8E4M3, 16, {{9, 4}}, 30.0f});   // fp8 codes saturating
  // The model's heads (head_dim 256, 16 q heads on 2 kv heads) at contexts past one 256-key chunk of
  // the CUDA kernels (cuda/attention_plan.h): a decode at 1500 keys on the paged fp8 cache of
  // NVIDIA's checkpoint (split over 6 chunks), a prefill crossing a chunk boundary, and a
  // speculative verify of 3 rows on a contiguous bf16 cache (tests/cuda/attention_cuda_test.cpp
  // takes 32k keys on the GPU alone).
  out.push_back({16, 2, 256, KvDtype::kFp8E4M3, 16, {{1500, 1}, {250, 20}}});
  out.push_back({16, 2, 256, KvDtype::kBf16, 0, {{300, 3}, {0, 9}}});
  return out;
}

TEST(BackendOps, KvWrite) {
  Harness h;
  for (const AttnShape& s : attention_shapes()) {
    h.check({"kv_write", describe(s), s.kv == KvDtype::kBf16 ? OpClass::kMove : OpClass::kMath,
             s.kv == KvDtype::kBf16 ? kNmseMove : kNmseExactMath, [=](Backend& b, uint32_t seed) {
               AttnStep st = prepare_step(b, s, seed);
               b.kv_write(st.descs, st.k.view, st.v.view);
               return std::vector<Output>{download(b, st.kc.view, "k cache", st.k_scale),
                                          download(b, st.vc.view, "v cache", st.v_scale)};
             }});
  }
}

TEST(BackendOps, Attention) {
  Harness h;
  for (const AttnShape& s : attention_shapes())
    for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
      h.check({"attention", cat(describe(s), math == AttentionMath::kHfEager ? " hf-eager" : " fp32"), OpClass::kMath,
               kNmseAttention, [=](Backend& b, uint32_t seed) {
                 AttnStep st = prepare_step(b, s, seed);
                 b.kv_write(st.descs, st.k.view, st.v.view);
                 return std::vector<Output>{run_attention(b, st, st.descs, math)};
               }});
    }
}

TEST(BackendOps, AttentionBatchInvariance) {
  Harness h;
  // The last two: prefills of more rows than a split takes, crossing 256-key chunk boundaries, whose
  // tokens alone (decodes) take the CUDA kernels' split path: the two paths must agree bit for bit.
  const AttnShape shapes[] = {{4, 2, 64, KvDtype::kBf16, 16, {{5, 1}, {0, 4}, {37, 3}}},
                              {4, 2, 64, KvDtype::kFp8E4M3, 0, {{5, 1}, {0, 4}, {37, 3}}},
                              {16, 2, 256, KvDtype::kFp8E4M3, 16, {{300, 1}, {250, 17}}},
                              {4, 2, 64, KvDtype::kBf16, 0, {{250, 20}}}};
  for (Harness::Column& col : h.columns())
    for (const AttnShape& s : shapes)
      for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
        Backend& b = *col.backend;
        AttnStep st = prepare_step(b, s, 31);
        b.kv_write(st.descs, st.k.view, st.v.view);
        const Output batch = run_attention(b, st, st.descs, math);
        const std::size_t row = static_cast<std::size_t>(st.gate.view.dim(1)) * 2;
        const std::string what =
            cat(col.spec.name, " attention ", describe(s), math == AttentionMath::kHfEager ? " hf-eager" : " fp32");
        for (const AttentionSeqDesc& d : st.descs) {
          // The sequence alone in the step.
          const Output alone = run_attention(b, st, {&d, 1}, math);
          if (!same_bytes(batch, d.seq.row0 * row, alone, d.seq.row0 * row, d.seq.rows * row,
                          cat(what, ": sequence at row ", d.seq.row0, " alone vs with the others")))
            return;
          // Each of its tokens alone, as a decode at its position (the cache holds every key).
          for (int64_t t = 0; t < d.seq.rows; ++t) {
            AttentionSeqDesc one = d;
            one.seq = {d.seq.row0 + t, 1, d.seq.pos0 + t};
            const Output tok = run_attention(b, st, {&one, 1}, math);
            if (!same_bytes(
                    batch, (d.seq.row0 + t) * row, tok, (d.seq.row0 + t) * row, row,
                    cat(what, ": token ", t, " of the sequence at row ", d.seq.row0, " alone vs in its prefill")))
              return;
          }
        }
      }
}

// ---- GDN sequence -----------------------------------------------------------------------------

// Host inputs of one GDN layer for several sequences that continue from a (random) earlier state.
struct GdnHost {
  GdnDims d;
  std::vector<int64_t> rows, row0;
  std::vector<uint16_t> x, conv_w, conv0;  // x [T, C]; conv0 [S, Kc-1, C]
  std::vector<float> g, beta, ssm0;        // [T, Hv]; ssm0 [S, Hv, dk, dv]
};

GdnHost make_gdn_host(const GdnDims& d, const std::vector<int64_t>& rows, uint32_t seed) {
  GdnHost h{d, rows, {}, {}, {}, {}, {}, {}, {}};
  int64_t T = 0;
  for (int64_t n : rows) h.row0.push_back(T), T += n;
  const int64_t S = static_cast<int64_t>(rows.size()), C = d.conv_dim();
  h.x = to_bf16(random_f32(T * C, seed));
  h.conv_w = to_bf16(random_f32(C * d.conv_kernel, seed + 1, 0.5f));
  h.conv0 = to_bf16(random_f32(S * d.conv_state_elems(), seed + 2));
  h.ssm0 = random_f32(S * d.state_elems(), seed + 3, 0.1f);
  const auto a = random_f32(T * d.Hv, seed + 4);
  for (float v : a) {
    h.g.push_back(-0.3f * std::fabs(v));
    h.beta.push_back(round_bf16(1.0f / (1.0f + std::exp(-2.0f * v))));  // a sigmoid, bf16 as the model's
  }
  return h;
}

// gdn_sequences for the sequences `seqs` of `h` (stacked in that order), each processed in pieces of
// split[0], split[1], ... rows (the last piece takes the rest; empty split: one piece each), all
// sequences' k-th pieces in one call.
std::vector<Output> run_gdn(Backend& b, const GdnHost& h, const std::vector<int>& seqs,
                            const std::vector<int64_t>& split) {
  const GdnDims& d = h.d;
  const int64_t C = d.conv_dim(), S = static_cast<int64_t>(seqs.size());
  std::vector<uint16_t> x, conv0;
  std::vector<float> g, beta, ssm0;
  for (int i : seqs) {
    const int64_t r0 = h.row0[i], n = h.rows[i];
    x.insert(x.end(), h.x.begin() + r0 * C, h.x.begin() + (r0 + n) * C);
    g.insert(g.end(), h.g.begin() + r0 * d.Hv, h.g.begin() + (r0 + n) * d.Hv);
    beta.insert(beta.end(), h.beta.begin() + r0 * d.Hv, h.beta.begin() + (r0 + n) * d.Hv);
    conv0.insert(conv0.end(), h.conv0.begin() + i * d.conv_state_elems(),
                 h.conv0.begin() + (i + 1) * d.conv_state_elems());
    ssm0.insert(ssm0.end(), h.ssm0.begin() + i * d.state_elems(), h.ssm0.begin() + (i + 1) * d.state_elems());
  }
  const int64_t T = static_cast<int64_t>(x.size()) / C;
  const TensorView w = prepared(b, DType::kBF16, {C, d.conv_kernel}, h.conv_w.data());
  DeviceTensor xd = upload(b, DType::kBF16, {T, C}, x, "x");
  DeviceTensor gd = upload(b, DType::kF32, {T, d.Hv}, g, "g");
  DeviceTensor bd = upload(b, DType::kF32, {T, d.Hv}, beta, "beta");
  DeviceTensor conv = upload(b, DType::kBF16, {S, d.conv_state_elems()}, conv0, "conv states");
  DeviceTensor ssm = upload(b, DType::kF32, {S, d.state_elems()}, ssm0, "ssm states");
  DeviceTensor qkv = alloc(b, DType::kBF16, {T, C}, "qkv out");
  DeviceTensor core = alloc(b, DType::kBF16, {T, d.value_dim()}, "core out");
  // One gdn_sequences call per round: round k runs piece k of every sequence (the descs in reverse
  // order of their rows; a sequence already done gives a desc without rows), as the model does.
  std::vector<int64_t> first(S, 0), done(S, 0);
  for (int64_t s = 1; s < S; ++s) first[s] = first[s - 1] + h.rows[seqs[static_cast<std::size_t>(s - 1)]];
  for (int64_t piece = 0;; ++piece) {
    std::vector<GdnSeqDesc> descs;
    bool any = false;
    for (int64_t s = S - 1; s >= 0; --s) {
      const GdnStateRef state{conv.view.as<uint16_t>() + s * d.conv_state_elems(),
                              ssm.view.as<float>() + s * d.state_elems()};
      const int64_t n = h.rows[seqs[static_cast<std::size_t>(s)]];
      const bool last = piece >= static_cast<int64_t>(split.size());
      const int64_t m = last ? n - done[s] : std::min(split[static_cast<std::size_t>(piece)], n - done[s]);
      descs.push_back({{first[s] + done[s], m, 100 + done[s]}, state});
      done[s] += m;
      any = any || m > 0;
    }
    if (!any) break;
    b.gdn_sequences(d, w, descs, xd.view, gd.view, bd.view, qkv.view, core.view);
  }
  return {download(b, qkv.view, "qkv out"), download(b, core.view, "core out"), download(b, conv.view, "conv state"),
          download(b, ssm.view, "ssm state")};
}

GdnDims gdn_dims(int Hk, int Hv, int dk, int dv) {
  GdnDims d;
  d.Hk = Hk, d.Hv = Hv, d.dk = dk, d.dv = dv, d.conv_kernel = 4;
  return d;
}

TEST(BackendOps, GdnSequence) {
  Harness h;
  struct Shape {
    GdnDims d;
    std::vector<int64_t> rows, split;
  };
  const Shape shapes[] = {
      {gdn_dims(2, 4, 32, 32), {3, 1, 6}, {}},   {gdn_dims(2, 4, 32, 32), {3, 1, 6}, {1, 2}},
      {gdn_dims(1, 2, 24, 40), {5}, {}},         {gdn_dims(1, 2, 24, 40), {5}, {4}},
      {gdn_dims(16, 32, 128, 128), {1, 3}, {2}},  // the model's heads (its 2 MB state: one case)
      {gdn_dims(16, 32, 128, 128), {1, 5}, {}},   // a decode and a short prefill in one step
      // Long prefills at the model's head sizes and k:v grouping, with fewer heads to stay fast on
      // the CPU columns (the GPU runs every head in parallel: the rows are what differ).
      {gdn_dims(1, 2, 128, 128), {64, 200}, {}}, {gdn_dims(1, 2, 128, 128), {200}, {37, 64}},
  };
  for (const Shape& s : shapes) {
    std::string rows, split;
    for (int64_t n : s.rows) rows += cat(rows.empty() ? "" : ",", n);
    for (int64_t n : s.split) split += cat(split.empty() ? "" : "+", n);
    h.check({"gdn_sequences",
             cat("Hk=", s.d.Hk, " Hv=", s.d.Hv, " dk=", s.d.dk, " dv=", s.d.dv, " rows=", rows,
                 split.empty() ? std::string(" whole") : " split " + split + "+rest"),
             OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               std::vector<int> all(s.rows.size());
               std::iota(all.begin(), all.end(), 0);
               return run_gdn(b, make_gdn_host(s.d, s.rows, seed), all, s.split);
             }});
  }
}

TEST(BackendOps, GdnSequenceBatchAndSplitInvariance) {
  Harness h;
  const GdnHost host = make_gdn_host(gdn_dims(2, 4, 32, 32), {3, 1, 7}, 44);
  const GdnDims& d = host.d;
  for (Harness::Column& col : h.columns()) {
    Backend& b = *col.backend;
    // The three sequences in one call, or in rounds of one piece each (a 1-row sequence done after
    // the first round): either way each sequence's bits are those it gets alone, however split.
    for (const std::vector<int64_t>& batch_split : {std::vector<int64_t>{}, {2, 1}}) {
      const std::vector<Output> batch = run_gdn(b, host, {0, 1, 2}, batch_split);
      for (int i = 0; i < 3; ++i)
        for (const std::vector<int64_t>& split : {std::vector<int64_t>{}, {1}, {2, 1}, {1, 1, 1, 1, 1, 1}}) {
          const std::vector<Output> alone = run_gdn(b, host, {i}, split);
          const std::string what = cat(col.spec.name, " gdn sequence ", i, " alone, split in ", split.size() + 1,
                                       " pieces, vs whole in the batch");
          const std::size_t r0 = static_cast<std::size_t>(host.row0[i]), n = static_cast<std::size_t>(host.rows[i]);
          const std::size_t sizes[] = {
              static_cast<std::size_t>(d.conv_dim()) * 2, static_cast<std::size_t>(d.value_dim()) * 2,
              static_cast<std::size_t>(d.conv_state_elems()) * 2, static_cast<std::size_t>(d.state_elems()) * 4};
          bool ok = same_bytes(batch[0], r0 * sizes[0], alone[0], 0, n * sizes[0], what) &&
                    same_bytes(batch[1], r0 * sizes[1], alone[1], 0, n * sizes[1], what) &&
                    same_bytes(batch[2], i * sizes[2], alone[2], 0, sizes[2], what) &&
                    same_bytes(batch[3], i * sizes[3], alone[3], 0, sizes[3], what);
          if (!ok) return;
        }
    }
  }
}

// gdn_sequences rejects descs that would race or reach outside the step (backend.h), on every
// backend, before touching any state.
TEST(BackendOps, GdnSequencesBadArgumentsThrowOnEveryBackend) {
  Harness h;
  const GdnHost host = make_gdn_host(gdn_dims(1, 2, 16, 16), {4}, 9);
  const GdnDims& d = host.d;
  const int64_t C = d.conv_dim(), T = 4;
  for (Harness::Column& col : h.columns()) {
    SCOPED_TRACE(col.spec.name);
    Backend& b = *col.backend;
    const TensorView w = prepared(b, DType::kBF16, {C, d.conv_kernel}, host.conv_w.data());
    DeviceTensor xd = upload(b, DType::kBF16, {T, C}, host.x, "x");
    DeviceTensor gd = upload(b, DType::kF32, {T, d.Hv}, host.g, "g");
    DeviceTensor bd = upload(b, DType::kF32, {T, d.Hv}, host.beta, "beta");
    std::vector<uint16_t> conv0(2 * d.conv_state_elems());
    std::vector<float> ssm0(2 * d.state_elems());
    for (std::size_t i = 0; i < conv0.size(); ++i) conv0[i] = host.conv0[i % host.conv0.size()];
    for (std::size_t i = 0; i < ssm0.size(); ++i) ssm0[i] = host.ssm0[i % host.ssm0.size()];
    DeviceTensor conv = upload(b, DType::kBF16, {2, d.conv_state_elems()}, conv0, "conv states");
    DeviceTensor ssm = upload(b, DType::kF32, {2, d.state_elems()}, ssm0, "ssm states");
    DeviceTensor qkv = alloc(b, DType::kBF16, {T, C}, "qkv out");
    DeviceTensor core = alloc(b, DType::kBF16, {T, d.value_dim()}, "core out");
    const GdnStateRef s0{conv.view.as<uint16_t>(), ssm.view.as<float>()};
    const GdnStateRef s1{conv.view.as<uint16_t>() + d.conv_state_elems(), ssm.view.as<float>() + d.state_elems()};
    auto run = [&](std::vector<GdnSeqDesc> descs) {
      b.gdn_sequences(d, w, descs, xd.view, gd.view, bd.view, qkv.view, core.view);
    };
    EXPECT_THROW(run({{{0, 2, 0}, s0}, {{2, 2, 0}, s0}}), std::invalid_argument);  // a shared state
    EXPECT_THROW(run({{{0, 3, 0}, s0}, {{2, 2, 0}, s1}}), std::invalid_argument);  // a shared row
    EXPECT_THROW(run({{{3, 2, 0}, s0}}), std::invalid_argument);                   // past the step's rows
    EXPECT_THROW(run({{{-1, 2, 0}, s0}}), std::invalid_argument);
    EXPECT_THROW(run({{{0, -1, 0}, s0}}), std::invalid_argument);
    EXPECT_THROW(run({{{0, 2, 0}, s0}, {{2, 1, 0}, GdnStateRef{}}}), std::invalid_argument);  // no state
    DeviceTensor short_g = alloc(b, DType::kF32, {T - 1, d.Hv}, "short g");
    const GdnSeqDesc one{{0, 1, 0}, s0};
    EXPECT_THROW(b.gdn_sequences(d, w, {&one, 1}, xd.view, short_g.view, bd.view, qkv.view, core.view),
                 std::invalid_argument);
    // Nothing ran: the states are as uploaded. Descs without rows may share a state or sit anywhere.
    EXPECT_NO_THROW(run({{{0, 0, 0}, s0}, {{9, 0, 0}, s0}, {{1, 0, 0}, GdnStateRef{}}}));
    const Output conv_after = download(b, conv.view, "conv"), ssm_after = download(b, ssm.view, "ssm");
    ASSERT_EQ(conv_after.bytes.size(), conv0.size() * 2);
    ASSERT_EQ(ssm_after.bytes.size(), ssm0.size() * 4);
    EXPECT_EQ(std::memcmp(conv_after.bytes.data(), conv0.data(), conv_after.bytes.size()), 0);
    EXPECT_EQ(std::memcmp(ssm_after.bytes.data(), ssm0.data(), ssm_after.bytes.size()), 0);
  }
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
