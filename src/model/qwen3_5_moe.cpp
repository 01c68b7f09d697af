#include "model/qwen3_5_moe.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <string>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/linear.h"
#include "kernels/norm.h"

namespace fp4serve::model {
namespace {

using Bf16 = std::vector<uint16_t>;

// y = bf16(x @ W^T): an nn.Linear on bf16 activations (fp32 accumulate, one rounding).
void project(const uint16_t* x, int64_t T, const kernels::WeightView& w, uint16_t* out, std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(T * w.n));
  kernels::linear_bf16(x, T, w, scratch.data());
  kernels::f32_to_bf16(scratch.data(), out, T * w.n);
}

// Several projections of the same bf16 x in ONE parallel region (linear_batch spreads all their
// rows over the threads together): outs[i] = x @ W_i^T in fp32, the values linear_bf16 gives.
void project_fp32(const uint16_t* x, int64_t T, std::initializer_list<std::pair<const kernels::WeightView*, float*>> outs) {
  const int64_t K = outs.begin()->first->k;
  thread_local std::vector<float> xf;
  xf.resize(static_cast<size_t>(T * K));
  kernels::bf16_to_f32(x, xf.data(), T * K);
  std::vector<kernels::LinearJob> jobs;
  for (const auto& [w, y] : outs) jobs.push_back({xf.data(), T, K, *w, y, w->n});
  kernels::linear_batch(jobs);
}

// x = bf16(x + y): HF's bf16 residual add.
void residual_add(uint16_t* x, const uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    x[i] = kernels::f32_to_bf16_bits(kernels::bf16_bits_to_f32(x[i]) + kernels::bf16_bits_to_f32(y[i]));
  }
}

// Runs fn, adding its wall time to *acc when profiling (acc != nullptr); no clock read otherwise.
template <class Fn>
void timed(double* acc, Fn&& fn) {
  if (!acc) {
    fn();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  *acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct StepLayout {
  std::vector<int64_t> offset;  // per sequence: first row; back() = total rows
  std::vector<int64_t> pos;     // per row: absolute position
  int64_t rows() const { return offset.back(); }
};

void gated_deltanet(const GatedDeltaNetWeights& g, const kernels::GdnDims& d, double eps, size_t layer_index,
                    const std::vector<BatchSequence>& step, const StepLayout& L, const uint16_t* h, uint16_t* out) {
  const int64_t T = L.rows(), C = d.conv_dim(), Vd = d.value_dim(), Hv = d.Hv;
  std::vector<float> scratch;
  Bf16 qkv_raw(static_cast<size_t>(T * C)), qkv(static_cast<size_t>(T * C)), z(static_cast<size_t>(T * Vd));
  Bf16 core(static_cast<size_t>(T * Vd)), normed(static_cast<size_t>(T * Vd));
  // The four input projections at once; b and a are handed to the gating as floats holding bf16 values.
  std::vector<float> fqkv(static_cast<size_t>(T * C)), fz(static_cast<size_t>(T * Vd));
  std::vector<float> a(static_cast<size_t>(T * Hv)), b(static_cast<size_t>(T * Hv));
  project_fp32(h, T, {{&g.in_proj_qkv, fqkv.data()}, {&g.in_proj_z, fz.data()}, {&g.in_proj_b, b.data()},
                      {&g.in_proj_a, a.data()}});
  kernels::f32_to_bf16(fqkv.data(), qkv_raw.data(), T * C);
  kernels::f32_to_bf16(fz.data(), z.data(), T * Vd);
  kernels::round_bf16_inplace(b.data(), T * Hv);
  kernels::round_bf16_inplace(a.data(), T * Hv);
  std::vector<float> gate(static_cast<size_t>(T * Hv)), beta(static_cast<size_t>(T * Hv));
  kernels::gdn_gating(a.data(), b.data(), g.a_log.data(), g.dt_bias.data(), T, Hv, gate.data(), beta.data());
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t r0 = L.offset[s], n = L.offset[s + 1] - r0;
    if (n == 0) continue;
    const GdnStateRef st = step[s].gdn.at(layer_index);
    // Run the recurrence piecewise so the state can be copied out at each snapshot point; the
    // recurrent form gives the same bits however the tokens are split.
    int64_t done = 0;
    auto run = [&](int64_t upto) {
      if (upto <= done) return;
      const int64_t a = r0 + done, m = upto - done;
      kernels::gdn_conv1d(qkv_raw.data() + a * C, m, C, g.conv_weight.data(), d.conv_kernel, st.conv,
                          qkv.data() + a * C);
      kernels::gdn_recurrent(qkv.data() + a * C, m, d, gate.data() + a * Hv, beta.data() + a * Hv, st.ssm,
                             core.data() + a * Vd);
      done = upto;
    };
    for (const StateCopyPoint& p : step[s].copies) {
      run(p.after_tokens);
      const GdnStateRef dst = p.dst.at(layer_index);
      std::copy_n(st.conv, d.conv_state_elems(), dst.conv);
      std::copy_n(st.ssm, d.state_elems(), dst.ssm);
    }
    run(n);
  }
  kernels::rmsnorm_gated(core.data(), z.data(), T * Hv, d.dv, g.norm_weight.data(), static_cast<float>(eps),
                         normed.data());
  project(normed.data(), T, g.out_proj, out, scratch);
}

void gated_attention(const GatedAttentionWeights& w, const ModelConfig& c, const kernels::RopeConfig& rope,
                     size_t layer_index, const std::vector<BatchSequence>& step, const StepLayout& L,
                     const uint16_t* h, uint16_t* out) {
  const int64_t T = L.rows(), D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  std::vector<float> scratch;
  Bf16 qg(static_cast<size_t>(T * Hq * 2 * D)), q(static_cast<size_t>(T * Hq * D)), gate(q.size());
  Bf16 k(static_cast<size_t>(T * Hkv * D)), v(k.size()), attn(q.size());
  {
    std::vector<float> fq(static_cast<size_t>(T * w.q_proj.n)), fk(static_cast<size_t>(T * w.k_proj.n)), fv(fk.size());
    project_fp32(h, T, {{&w.q_proj, fq.data()}, {&w.k_proj, fk.data()}, {&w.v_proj, fv.data()}});
    kernels::f32_to_bf16(fq.data(), qg.data(), T * w.q_proj.n);
    kernels::f32_to_bf16(fk.data(), k.data(), T * w.k_proj.n);
    kernels::f32_to_bf16(fv.data(), v.data(), T * w.v_proj.n);
  }
  // q_proj rows are per head [q (D) | gate (D)] (HF: view(..., -1, 2D) then chunk).
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hh = 0; hh < Hq; ++hh) {
      const uint16_t* src = qg.data() + (t * Hq + hh) * 2 * D;
      std::copy(src, src + D, q.data() + (t * Hq + hh) * D);
      std::copy(src + D, src + 2 * D, gate.data() + (t * Hq + hh) * D);
    }
  const float eps = static_cast<float>(c.rms_norm_eps);
  kernels::rmsnorm_1p(q.data(), T * Hq, D, w.q_norm.data(), eps, q.data());
  kernels::rmsnorm_1p(k.data(), T * Hkv, D, w.k_norm.data(), eps, k.data());
  kernels::apply_rope_text(q.data(), T, Hq, rope, L.pos.data());
  kernels::apply_rope_text(k.data(), T, Hkv, rope, L.pos.data());
  std::vector<kernels::AttentionSeq> seqs;
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t r0 = L.offset[s], n = L.offset[s + 1] - r0;
    if (n == 0) continue;
    kernels::KvView kv = step[s].kv.at(layer_index);
    if (kv.n_kv_heads != Hkv || kv.head_dim != D) throw std::invalid_argument("KV view of the wrong head layout");
    kv.k_scale = w.k_scale;  // the checkpoint's scales (1.0 when it has none, as vLLM)
    kv.v_scale = w.v_scale;
    kernels::kv_write(kv, k.data() + r0 * Hkv * D, v.data() + r0 * Hkv * D, n, step[s].pos0);
    kernels::AttentionSeq a;
    a.q = q.data() + r0 * Hq * D;
    a.gate = gate.data() + r0 * Hq * D;
    a.T = n;
    a.pos0 = step[s].pos0;
    a.kv = kv;
    a.out = attn.data() + r0 * Hq * D;
    seqs.push_back(a);
  }
  kernels::gated_attention(seqs, static_cast<int>(Hq));
  project(attn.data(), T, w.o_proj, out, scratch);
}

}  // namespace

Qwen35MoeModel::Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint)
    : ck_(std::move(checkpoint)), w_(bind_model_weights(*ck_)) {}

SequenceState Qwen35MoeModel::new_sequence(int64_t capacity, kernels::KvDtype kv_dtype) const {
  const ModelConfig& c = config();
  SequenceState s;
  s.capacity = capacity;
  s.kv_dtype = kv_dtype;
  const size_t elem = kv_dtype == kernels::KvDtype::kBf16 ? 2 : 1;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.is_full_attention(l)) {
      s.k.emplace_back(static_cast<size_t>(capacity * c.kv_dim()) * elem, 0);
      s.v.emplace_back(static_cast<size_t>(capacity * c.kv_dim()) * elem, 0);
    } else {
      s.conv.emplace_back(static_cast<size_t>(w_.gdn_dims.conv_state_elems()), 0);
      s.ssm.emplace_back(static_cast<size_t>(w_.gdn_dims.state_elems()), 0.0f);
    }
  }
  return s;
}

std::vector<float> Qwen35MoeModel::forward(const std::vector<StepSequence>& step,
                                           std::vector<std::vector<uint16_t>>* hidden_states) const {
  const ModelConfig& c = config();
  std::vector<BatchSequence> batch;
  batch.reserve(step.size());
  for (const StepSequence& s : step) {
    SequenceState& st = *s.state;
    if (st.length + static_cast<int64_t>(s.tokens.size()) > st.capacity) {
      throw std::invalid_argument("sequence of " + std::to_string(st.length + s.tokens.size()) +
                                  " tokens exceeds its reserved capacity of " + std::to_string(st.capacity));
    }
    BatchSequence b;
    b.tokens = s.tokens;
    b.pos0 = st.length;
    b.logits = s.all_logits ? BatchSequence::Logits::kAll : BatchSequence::Logits::kLast;
    for (size_t l = 0; l < st.conv.size(); ++l) b.gdn.push_back({st.conv[l].data(), st.ssm[l].data()});
    for (size_t l = 0; l < st.k.size(); ++l) {
      kernels::KvView kv;
      kv.dtype = st.kv_dtype;
      kv.k = st.k[l].data();
      kv.v = st.v[l].data();
      kv.capacity = st.capacity;
      kv.n_kv_heads = static_cast<int>(c.num_key_value_heads);
      kv.head_dim = static_cast<int>(c.head_dim);
      b.kv.push_back(kv);
    }
    batch.push_back(std::move(b));
  }
  std::vector<float> logits = forward_batch(batch, hidden_states);
  for (const auto& s : step) s.state->length += static_cast<int64_t>(s.tokens.size());
  return logits;
}

std::vector<float> Qwen35MoeModel::forward_batch(const std::vector<BatchSequence>& step,
                                                 std::vector<std::vector<uint16_t>>* hidden_states,
                                                 StepProfile* profile, const LogitsRowSink& sink) const {
  std::vector<float> logits;
  timed(profile ? &profile->total_s : nullptr, [&] { logits = forward_step(step, hidden_states, profile, sink); });
  if (profile) ++profile->steps;
  return logits;
}

std::vector<float> Qwen35MoeModel::forward_step(const std::vector<BatchSequence>& step,
                                                std::vector<std::vector<uint16_t>>* hidden_states,
                                                StepProfile* profile, const LogitsRowSink& sink) const {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, V = c.vocab_size;
  StepLayout L;
  L.offset.push_back(0);
  std::vector<int32_t> ids;
  const size_t num_gdn = static_cast<size_t>(c.num_linear_attention_layers());
  const size_t num_attn = static_cast<size_t>(c.num_full_attention_layers());
  for (const auto& s : step) {
    if (s.gdn.size() != num_gdn || s.kv.size() != num_attn) {
      throw std::invalid_argument("step sequence with " + std::to_string(s.gdn.size()) + " GDN states and " +
                                  std::to_string(s.kv.size()) + " KV views for a model with " +
                                  std::to_string(num_gdn) + " and " + std::to_string(num_attn));
    }
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t id = s.tokens[i];
      if (id < 0 || id >= V) {
        throw std::invalid_argument("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                                    std::to_string(V));
      }
      ids.push_back(id);
      L.pos.push_back(s.pos0 + static_cast<int64_t>(i));
    }
    L.offset.push_back(static_cast<int64_t>(ids.size()));
  }
  const int64_t T = L.rows();
  Bf16 x(static_cast<size_t>(T * H)), h(x.size()), mixed(x.size());
  kernels::embedding_lookup(w_.embed_tokens, V, H, ids.data(), T, x.data());
  if (hidden_states) hidden_states->assign(1, x);
  const float eps = static_cast<float>(c.rms_norm_eps);
  size_t gdn_index = 0, attn_index = 0;
  for (const LayerWeights& layer : w_.layers) {
    kernels::rmsnorm_1p(x.data(), T, H, layer.input_norm.data(), eps, h.data());
    if (layer.kind == LayerKind::kFullAttention) {
      timed(profile ? &profile->attention_s : nullptr,
            [&] { gated_attention(layer.attn, c, w_.rope, attn_index++, step, L, h.data(), mixed.data()); });
      if (profile) ++profile->attention_layers;
    } else {
      timed(profile ? &profile->gdn_s : nullptr, [&] {
        gated_deltanet(layer.gdn, w_.gdn_dims, c.rms_norm_eps, gdn_index++, step, L, h.data(), mixed.data());
      });
      if (profile) ++profile->gdn_layers;
    }
    residual_add(x.data(), mixed.data(), T * H);
    kernels::rmsnorm_1p(x.data(), T, H, layer.post_norm.data(), eps, h.data());
    timed(profile ? &profile->moe_s : nullptr, [&] { kernels::moe_block(h.data(), T, layer.moe, mixed.data()); });
    if (profile) ++profile->moe_blocks;
    residual_add(x.data(), mixed.data(), T * H);
    if (hidden_states) hidden_states->push_back(x);
  }
  if (hidden_states) {
    // As transformers' output_hidden_states: the last entry is the final norm's output.
    kernels::rmsnorm_1p(x.data(), T, H, w_.final_norm.data(), eps, hidden_states->back().data());
  }
  // Final norm and lm_head only on the rows that need logits (HF's logits_to_keep).
  std::vector<int64_t> rows;
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t r0 = L.offset[s], r1 = L.offset[s + 1];
    if (r1 == r0) continue;
    if (step[s].logits == BatchSequence::Logits::kAll) {
      for (int64_t r = r0; r < r1; ++r) rows.push_back(r);
    } else if (step[s].logits == BatchSequence::Logits::kLast) {
      rows.push_back(r1 - 1);
    } else if (step[s].logits == BatchSequence::Logits::kLastN) {
      for (int64_t r = std::max(r0, r1 - step[s].last_rows); r < r1; ++r) rows.push_back(r);
    }
  }
  timed(profile ? &profile->lm_head_s : nullptr, [&] { stream_sink_rows(step, L.offset, x.data(), sink); });
  const int64_t R = static_cast<int64_t>(rows.size());
  if (R == 0) return {};
  std::vector<float> logits(static_cast<size_t>(R * V));
  timed(profile ? &profile->lm_head_s : nullptr, [&] { lm_head_rows(x.data(), rows, logits.data()); });
  return logits;
}

void Qwen35MoeModel::stream_sink_rows(const std::vector<BatchSequence>& step, std::span<const int64_t> offset,
                                      const uint16_t* x, const LogitsRowSink& sink) const {
  std::vector<float> block;
  std::vector<int64_t> rows;
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t n = std::min(step[s].sink_rows, offset[s + 1] - offset[s]);
    if (n <= 0) continue;
    if (!sink) throw std::invalid_argument("step sequence with sink rows but no logits row sink");
    for (int64_t first = 0; first < n; first += kSinkBlockRows) {
      const int64_t count = std::min(kSinkBlockRows, n - first);
      rows.resize(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) rows[static_cast<size_t>(i)] = offset[s] + first + i;
      block.resize(static_cast<size_t>(count * config().vocab_size));
      lm_head_rows(x, rows, block.data());
      sink(s, first, count, block.data());
    }
  }
}

void Qwen35MoeModel::lm_head_rows(const uint16_t* x, std::span<const int64_t> rows, float* out) const {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const int64_t R = static_cast<int64_t>(rows.size());
  Bf16 picked(static_cast<size_t>(R * H));
  for (int64_t i = 0; i < R; ++i) std::copy_n(x + rows[static_cast<size_t>(i)] * H, H, picked.data() + i * H);
  kernels::rmsnorm_1p(picked.data(), R, H, w_.final_norm.data(), static_cast<float>(c.rms_norm_eps), picked.data());
  kernels::linear_bf16(picked.data(), R, w_.lm_head, out);
  kernels::round_bf16_inplace(out, R * V);  // HF returns bf16 logits
}

}  // namespace fp4serve::model
