#include "model/qwen3_5_moe.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fp4serve::model {
namespace {

using kernels::LinearOut;
using kernels::TensorView;

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

// The T rows of a full-size workspace view (as a [T, ...] view).
TensorView first(const TensorView& v, int64_t T) { return v.rows(0, T); }

// out = bf16(x @ W^T): an nn.Linear on bf16 activations (fp32 accumulate, one rounding); f32 is
// scratch of out's shape.
void project(kernels::Backend& be, const TensorView& x, const kernels::LinearHandle& w, const TensorView& f32,
             const TensorView& out) {
  const LinearOut o{w, f32};
  be.linears(x, std::span<const LinearOut>(&o, 1));
  be.to_bf16(f32, out);
}

void copy_to_host(kernels::Backend& be, const TensorView& v, std::vector<uint16_t>& host) {
  host.resize(static_cast<size_t>(v.numel()));
  be.download(host.data(), v);
}

}  // namespace

Qwen35MoeModel::Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint)
    : Qwen35MoeModel(std::move(checkpoint), kernels::default_backend()) {}

Qwen35MoeModel::Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint, kernels::Backend& backend)
    : ck_(std::move(checkpoint)), backend_(&backend), w_(bind_model_weights(*ck_, backend)) {}

Qwen35MoeModel::Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint,
                               std::shared_ptr<kernels::Backend> backend)
    : ck_(std::move(checkpoint)),
      owned_backend_(std::move(backend)),
      backend_(owned_backend_.get()),
      w_(bind_model_weights(*ck_, *backend_)) {}

SequenceState Qwen35MoeModel::new_sequence(int64_t capacity, kernels::KvDtype kv_dtype) const {
  if (backend_->device() != kernels::Device::kCpu)
    throw std::logic_error("new_sequence: contiguous host state needs a host-memory backend");
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
  // Views of each sequence's contiguous state, alive for the call.
  std::vector<std::vector<GdnStateRef>> gdn(step.size());
  std::vector<std::vector<kernels::KvView>> kv(step.size());
  std::vector<BatchSequence> batch;
  batch.reserve(step.size());
  for (size_t i = 0; i < step.size(); ++i) {
    SequenceState& st = *step[i].state;
    if (st.length + static_cast<int64_t>(step[i].tokens.size()) > st.capacity) {
      throw std::invalid_argument("sequence of " + std::to_string(st.length + step[i].tokens.size()) +
                                  " tokens exceeds its reserved capacity of " + std::to_string(st.capacity));
    }
    for (size_t l = 0; l < st.conv.size(); ++l) gdn[i].push_back({st.conv[l].data(), st.ssm[l].data()});
    for (size_t l = 0; l < st.k.size(); ++l) {
      kernels::KvView v;
      v.dtype = st.kv_dtype;
      v.k = st.k[l].data();
      v.v = st.v[l].data();
      v.capacity = st.capacity;
      v.n_kv_heads = static_cast<int>(c.num_key_value_heads);
      v.head_dim = static_cast<int>(c.head_dim);
      kv[i].push_back(v);
    }
    BatchSequence b;
    b.tokens = step[i].tokens;
    b.pos0 = st.length;
    b.logits = step[i].all_logits ? BatchSequence::Logits::kAll : BatchSequence::Logits::kLast;
    b.gdn = gdn[i];
    b.kv = kv[i];
    b.embeds = step[i].embeds;
    b.mrope = step[i].mrope;
    batch.push_back(b);
  }
  std::vector<float> logits = forward_batch(batch, hidden_states);
  for (const auto& s : step) s.state->length += static_cast<int64_t>(s.tokens.size());
  return logits;
}

kernels::ModelShape Qwen35MoeModel::shape() const {
  const ModelConfig& c = config();
  kernels::ModelShape m;
  m.hidden = c.hidden_size;
  m.num_q_heads = c.num_attention_heads;
  m.num_kv_heads = c.num_key_value_heads;
  m.head_dim = c.head_dim;
  m.experts = c.num_experts;
  m.top_k = c.num_experts_per_tok;
  m.moe_intermediate = c.moe_intermediate_size;
  m.shared_intermediate = c.shared_expert_intermediate_size;
  m.gdn_key_dim = w_.gdn_dims.key_dim();
  m.gdn_value_heads = w_.gdn_dims.Hv;
  m.gdn_head_v_dim = w_.gdn_dims.dv;
  m.max_linear_k = std::max({m.hidden, w_.gdn_dims.value_dim(), m.num_q_heads * m.head_dim, m.moe_intermediate,
                             m.shared_intermediate});
  return m;
}

kernels::StepLimits Qwen35MoeModel::limits_for(std::span<const BatchSequence> step) const {
  kernels::StepLimits l;
  l.max_seqs = static_cast<int64_t>(step.size());
  for (const BatchSequence& s : step) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    l.max_tokens += n;
    l.max_logit_rows += s.logits == BatchSequence::Logits::kAll     ? n
                        : s.logits == BatchSequence::Logits::kLast  ? 1
                        : s.logits == BatchSequence::Logits::kLastN ? std::clamp<int64_t>(s.last_rows, 0, n)
                                                                    : 0;
    l.max_context = std::max(l.max_context, s.pos0 + n);
  }
  return l;
}

std::vector<float> Qwen35MoeModel::forward_batch(const std::vector<BatchSequence>& step,
                                                 std::vector<std::vector<uint16_t>>* hidden_states,
                                                 StepProfile* profile, const LogitsRowSink& sink) const {
  StepWorkspace ws(*backend_, config(), limits_for(step));
  const TensorView logits = forward_step(step, ws, profile, sink, hidden_states);
  std::vector<float> out(static_cast<size_t>(logits.numel()));
  if (!out.empty()) backend_->download(out.data(), logits);
  return out;
}

void Qwen35MoeModel::stage_inputs(std::span<const BatchSequence> step, StepWorkspace& ws, bool mtp) const {
  const ModelConfig& c = config();
  const int64_t V = c.vocab_size;
  const size_t num_gdn = mtp ? 0 : static_cast<size_t>(c.num_linear_attention_layers());
  const size_t num_attn = mtp ? 1 : static_cast<size_t>(c.num_full_attention_layers());
  int64_t T = 0;
  for (const BatchSequence& s : step) T += static_cast<int64_t>(s.tokens.size());
  if (T > ws.limits.max_tokens || static_cast<int64_t>(step.size()) > std::max<int64_t>(ws.limits.max_seqs, 0))
    throw std::invalid_argument("step of " + std::to_string(T) + " tokens in " + std::to_string(step.size()) +
                                " sequences exceeds the workspace's " + std::to_string(ws.limits.max_tokens) +
                                " tokens / " + std::to_string(ws.limits.max_seqs) + " sequences");
  ws.host_ids.clear();
  ws.host_pos.clear();
  ws.offsets.clear();
  ws.offsets.push_back(0);
  // A step with a multimodal sequence stages [3, T] positions (each text row's value three times:
  // the same rotation as one position); otherwise [T], as a text-only model always did.
  ws.pos_mrope = std::any_of(step.begin(), step.end(), [](const BatchSequence& s) { return !s.mrope.empty(); });
  if (ws.pos_mrope) ws.host_pos.resize(static_cast<std::size_t>(3 * T));
  for (const BatchSequence& s : step) {
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
      ws.host_ids.push_back(id);
      if (!ws.pos_mrope) ws.host_pos.push_back(s.pos0 + static_cast<int64_t>(i));
    }
    if (ws.pos_mrope) {
      const int64_t r0 = ws.offsets.back(), n = static_cast<int64_t>(s.tokens.size());
      int64_t* p = ws.host_pos.data();
      if (s.mrope.empty()) {
        for (int64_t i = 0; i < n; ++i) p[r0 + i] = p[T + r0 + i] = p[2 * T + r0 + i] = s.pos0 + i;
      } else {
        mrope_positions(s.mrope, s.pos0, n, p + r0, p + T + r0, p + 2 * T + r0);
      }
    }
    ws.offsets.push_back(static_cast<int64_t>(ws.host_ids.size()));
  }
  if (T > 0) {
    backend_->upload(first(ws.ids, T), ws.host_ids.data());
    backend_->upload(first(ws.pos, ws.pos_mrope ? 3 * T : T), ws.host_pos.data());
  }
}

void Qwen35MoeModel::scatter_embeddings(std::span<const BatchSequence> step, StepWorkspace& ws, int64_t T) const {
  kernels::Backend& be = *backend_;
  // The f32 rows go through out_proj's scratch (free until the first layer): upload, then one rounding.
  const TensorView f32 = first(ws.out_f32, T), x = first(ws.x, T);
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t r0 = ws.offsets[s], n = ws.offsets[s + 1] - r0;
    for (const EmbeddingRows& e : step[s].embeds) {
      if (e.count == 0) continue;
      if (e.first < 0 || e.count < 0 || e.first + e.count > n || e.values == nullptr)
        throw std::invalid_argument("embedding rows " + std::to_string(e.first) + " + " + std::to_string(e.count) +
                                    " outside the sequence's " + std::to_string(n) + " new tokens");
      const TensorView rows_f32 = f32.rows(r0 + e.first, e.count);
      backend_->upload(rows_f32, e.values);
      be.to_bf16(rows_f32, x.rows(r0 + e.first, e.count));
    }
  }
}

void Qwen35MoeModel::gated_deltanet(const LayerWeights& layer, size_t gdn_index, std::span<const BatchSequence> step,
                                    StepWorkspace& ws, int64_t T) const {
  kernels::Backend& be = *backend_;
  const GatedDeltaNetWeights& g = layer.gdn;
  const kernels::GdnDims& d = w_.gdn_dims;
  const TensorView h = first(ws.h, T);
  // The four input projections at once; b and a go to the gating as floats holding bf16 values.
  const LinearOut outs[] = {{g.in_proj_qkv, first(ws.gdn_qkv_f32, T)},
                            {g.in_proj_z, first(ws.gdn_z_f32, T)},
                            {g.in_proj_b, first(ws.gdn_b, T)},
                            {g.in_proj_a, first(ws.gdn_a, T)}};
  be.linears(h, outs);
  const TensorView qkv_raw = first(ws.gdn_qkv_raw, T), z = first(ws.gdn_z, T);
  be.to_bf16(outs[0].out, qkv_raw);
  be.to_bf16(outs[1].out, z);
  be.round_bf16(outs[2].out);
  be.round_bf16(outs[3].out);
  const TensorView gate = first(ws.gdn_g, T), beta = first(ws.gdn_beta, T);
  be.gdn_gating(outs[3].out, outs[2].out, g.a_log, g.dt_bias, gate, beta);
  const TensorView qkv = first(ws.gdn_qkv, T), core = first(ws.gdn_core, T);
  // Every sequence's rows run in one call per round: round r takes each sequence's r-th piece, its
  // rows split at its snapshot points, and is followed by the state copies of the points it reached
  // (most steps have no points: one round). A sequence sees the same runs and copies in the same
  // order as alone, and the recurrent form gives the same bits however its tokens are split.
  StepWorkspace::GdnRounds& rounds = ws.gdn_rounds;
  std::vector<StepWorkspace::GdnRounds::Cursor>& cur = rounds.cursors;
  cur.assign(step.size(), {});
  // A sequence whose state an earlier one of the step has (the runner's padding shares one scratch
  // slot) runs no rows: its desc stays, without rows, so the calls hold as many descs either way.
  // States are per slot, so which sequences share one is the same in every GDN layer: found once per
  // step, at the first GDN layer (layers run in order), not sorted again per layer.
  std::vector<char>& shared = rounds.shared;
  if (gdn_index == 0 || shared.size() != step.size()) {
    std::vector<std::pair<const float*, size_t>>& by_state = rounds.by_state;
    by_state.clear();
    for (size_t s = 0; s < step.size(); ++s)
      if (ws.offsets[s + 1] > ws.offsets[s]) by_state.emplace_back(step[s].gdn[gdn_index].ssm, s);
    std::sort(by_state.begin(), by_state.end());
    shared.assign(step.size(), 0);
    for (size_t i = 1; i < by_state.size(); ++i)
      if (by_state[i].first == by_state[i - 1].first) shared[by_state[i].second] = 1;
  }
  std::vector<kernels::GdnSeqDesc>& descs = rounds.descs;
  std::vector<GdnStateRef>& copy_dst = rounds.copy_dst;
  std::vector<GdnStateRef>& copy_src = rounds.copy_src;
  for (bool more = true; more;) {
    more = false;
    descs.clear();
    copy_dst.clear();
    copy_src.clear();
    for (size_t s = 0; s < step.size(); ++s) {
      const int64_t r0 = ws.offsets[s], n = ws.offsets[s + 1] - r0;
      StepWorkspace::GdnRounds::Cursor& c = cur[s];
      if (n == 0 || (c.done >= n && c.point >= step[s].copies.size())) continue;
      const GdnStateRef state = step[s].gdn[gdn_index];
      const bool at_point = c.point < step[s].copies.size();
      const int64_t upto = at_point ? step[s].copies[c.point].after_tokens : n;
      if (upto > c.done) {
        descs.push_back({{r0 + c.done, shared[s] ? 0 : upto - c.done, step[s].pos0 + c.done}, state});
        c.done = upto;
      }
      if (at_point) {
        copy_dst.push_back(step[s].copies[c.point].dst[gdn_index]);
        copy_src.push_back(state);
        ++c.point;
      }
      more = more || c.done < n || c.point < step[s].copies.size();
    }
    if (!descs.empty()) be.gdn_sequences(d, g.conv_weight, descs, qkv_raw, gate, beta, qkv, core);
    if (!copy_dst.empty()) be.state_copy(copy_dst, copy_src, d);
  }
  const TensorView normed = first(ws.gdn_normed, T);
  const int64_t Hv = d.Hv;
  be.rmsnorm_gated(core.reshaped({T * Hv, d.dv}), z.reshaped({T * Hv, d.dv}), g.norm_weight,
                   static_cast<float>(config().rms_norm_eps), normed.reshaped({T * Hv, d.dv}));
  project(be, normed, g.out_proj, first(ws.out_f32, T), first(ws.mixed, T));
}

void Qwen35MoeModel::gated_attention(const LayerWeights& layer, size_t attn_index,
                                     std::span<const BatchSequence> step, StepWorkspace& ws, int64_t T) const {
  kernels::Backend& be = *backend_;
  const GatedAttentionWeights& w = layer.attn;
  const ModelConfig& c = config();
  const int64_t D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const LinearOut outs[] = {{w.q_proj, first(ws.attn_qg_f32, T)},
                            {w.k_proj, first(ws.attn_k_f32, T)},
                            {w.v_proj, first(ws.attn_v_f32, T)}};
  be.linears(first(ws.h, T), outs);
  const TensorView qg = first(ws.attn_qg, T), q = first(ws.attn_q, T), k = first(ws.attn_k, T),
                   v = first(ws.attn_v, T), gate = first(ws.attn_gate, T);
  be.to_bf16(outs[0].out, qg);
  be.to_bf16(outs[1].out, k);
  be.to_bf16(outs[2].out, v);
  // q_proj rows are per head [q (D) | gate (D)] (HF: view(..., -1, 2D) then chunk): two strided copies.
  TensorView q_half = TensorView::contiguous(qg.data, DType::kBF16, {T * Hq, D}, qg.device);
  q_half.stride[0] = 2 * D;
  TensorView gate_half = q_half;
  gate_half.data = static_cast<uint16_t*>(qg.data) + D;
  be.copy(q.reshaped({T * Hq, D}), q_half);
  be.copy(gate.reshaped({T * Hq, D}), gate_half);
  const float eps = static_cast<float>(c.rms_norm_eps);
  be.rmsnorm(q.reshaped({T * Hq, D}), w.q_norm, eps, kernels::NormKind::kOnePlus, q.reshaped({T * Hq, D}));
  be.rmsnorm(k.reshaped({T * Hkv, D}), w.k_norm, eps, kernels::NormKind::kOnePlus, k.reshaped({T * Hkv, D}));
  const TensorView pos = ws.pos_mrope ? first(ws.pos, 3 * T).reshaped({3, T}) : first(ws.pos, T);
  be.rope(q, pos, w_.rope);
  be.rope(k, pos, w_.rope);
  ws.attn_seqs.clear();
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t r0 = ws.offsets[s], n = ws.offsets[s + 1] - r0;
    if (n == 0) continue;
    kernels::AttentionSeqDesc desc;
    desc.seq = {r0, n, step[s].pos0};
    desc.kv = step[s].kv[attn_index];
    if (desc.kv.n_kv_heads != Hkv || desc.kv.head_dim != D) throw std::invalid_argument("KV view of the wrong head layout");
    desc.kv.k_scale = w.k_scale;  // the checkpoint's scales (1.0 when it has none, as vLLM)
    desc.kv.v_scale = w.v_scale;
    ws.attn_seqs.push_back(desc);
  }
  be.kv_write(ws.attn_seqs, k, v);
  const TensorView out = first(ws.attn_out, T);
  be.attention(ws.attn_seqs, q, gate, out);
  project(be, out, w.o_proj, first(ws.out_f32, T), first(ws.mixed, T));
}

kernels::TensorView Qwen35MoeModel::forward_step(std::span<const BatchSequence> step, StepWorkspace& ws,
                                                 StepProfile* profile, const LogitsRowSink& sink,
                                                 std::vector<std::vector<uint16_t>>* hidden_states) const {
  kernels::Backend& be = *backend_;
  const ModelConfig& c = config();
  const int64_t V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  TensorView result;
  timed(profile ? &profile->total_s : nullptr, [&] {
    stage_inputs(step, ws);
    const int64_t T = ws.offsets.back();
    // Rows through the lm_head (HF's logits_to_keep).
    ws.logit_rows.clear();
    for (size_t s = 0; s < step.size(); ++s) {
      const int64_t r0 = ws.offsets[s], r1 = ws.offsets[s + 1];
      if (r1 == r0) continue;
      if (step[s].logits == BatchSequence::Logits::kAll) {
        for (int64_t r = r0; r < r1; ++r) ws.logit_rows.push_back(r);
      } else if (step[s].logits == BatchSequence::Logits::kLast) {
        ws.logit_rows.push_back(r1 - 1);
      } else if (step[s].logits == BatchSequence::Logits::kLastN) {
        for (int64_t r = std::max(r0, r1 - step[s].last_rows); r < r1; ++r) ws.logit_rows.push_back(r);
      }
    }
    const auto R = static_cast<int64_t>(ws.logit_rows.size());
    if (R > ws.limits.max_logit_rows)
      throw std::invalid_argument("step needs " + std::to_string(R) + " logits rows; the workspace holds " +
                                  std::to_string(ws.limits.max_logit_rows));
    if (T == 0) {
      result = first(ws.logits, 0);
      return;
    }
    const TensorView x = first(ws.x, T), h = first(ws.h, T), mixed = first(ws.mixed, T);
    be.embedding(w_.embed_tokens, first(ws.ids, T), x);
    scatter_embeddings(step, ws, T);
    if (hidden_states) {
      hidden_states->assign(1, {});
      copy_to_host(be, x, hidden_states->back());
    }
    size_t gdn_index = 0, attn_index = 0;
    for (const LayerWeights& layer : w_.layers) {
      be.rmsnorm(x, layer.input_norm, eps, kernels::NormKind::kOnePlus, h);
      if (layer.kind == LayerKind::kFullAttention) {
        timed(profile ? &profile->attention_s : nullptr,
              [&] { gated_attention(layer, attn_index++, step, ws, T); });
        if (profile) ++profile->attention_layers;
      } else {
        timed(profile ? &profile->gdn_s : nullptr, [&] { gated_deltanet(layer, gdn_index++, step, ws, T); });
        if (profile) ++profile->gdn_layers;
      }
      be.residual_add(x, mixed);
      be.rmsnorm(x, layer.post_norm, eps, kernels::NormKind::kOnePlus, h);
      timed(profile ? &profile->moe_s : nullptr, [&] { be.moe(h, layer.moe, mixed); });
      if (profile) ++profile->moe_blocks;
      be.residual_add(x, mixed);
      if (hidden_states) {
        hidden_states->emplace_back();
        copy_to_host(be, x, hidden_states->back());
      }
    }
    if (hidden_states) {
      // As transformers' output_hidden_states: the last entry is the final norm's output.
      be.rmsnorm(x, w_.final_norm, eps, kernels::NormKind::kOnePlus, h);
      copy_to_host(be, h, hidden_states->back());
    }
    timed(profile ? &profile->lm_head_s : nullptr, [&] { stream_sink_rows(step, ws, sink); });
    result = first(ws.logits, R);
    if (R == 0) return;
    timed(profile ? &profile->lm_head_s : nullptr,
          [&] { lm_head_rows(ws, ws.logit_rows, first(ws.picked, R), result); });
    (void)V;
  });
  if (profile) ++profile->steps;
  return result;
}

void Qwen35MoeModel::stream_sink_rows(std::span<const BatchSequence> step, StepWorkspace& ws,
                                      const LogitsRowSink& sink) const {
  const int64_t V = config().vocab_size;
  for (size_t s = 0; s < step.size(); ++s) {
    const int64_t n = std::min(step[s].sink_rows, ws.offsets[s + 1] - ws.offsets[s]);
    if (n <= 0) continue;
    if (!sink) throw std::invalid_argument("step sequence with sink rows but no logits row sink");
    for (int64_t first_row = 0; first_row < n; first_row += kSinkBlockRows) {
      const int64_t count = std::min(kSinkBlockRows, n - first_row);
      ws.sink_rows.clear();
      for (int64_t i = 0; i < count; ++i) ws.sink_rows.push_back(ws.offsets[s] + first_row + i);
      const TensorView block = first(ws.sink_logits, count);
      lm_head_rows(ws, ws.sink_rows, first(ws.sink_picked, count), block);
      const float* rows = block.as<const float>();
      if (block.device != kernels::Device::kCpu) {
        backend_->download(ws.host_sink.data(), block);
        rows = ws.host_sink.data();
      }
      sink(s, first_row, count, rows);
      (void)V;
    }
  }
}

void Qwen35MoeModel::lm_head_rows(const StepWorkspace& ws, std::span<const int64_t> rows, const TensorView& picked,
                                  const TensorView& logits) const {
  kernels::Backend& be = *backend_;
  const int64_t T = ws.offsets.back();
  be.gather_rows(first(ws.x, T), rows, picked);
  be.rmsnorm(picked, w_.final_norm, static_cast<float>(config().rms_norm_eps), kernels::NormKind::kOnePlus, picked);
  const LinearOut o{w_.lm_head, logits};
  be.linears(picked, std::span<const LinearOut>(&o, 1));
  be.round_bf16(logits);  // HF returns bf16 logits
}

}  // namespace fp4serve::model
