#include "model/model_weights.h"

#include <cstddef>
#include <span>
#include <cstring>
#include <unordered_map>

#include "checkpoint/checkpoint_error.h"
#include "kernels/bf16.h"
#include "tensor/float_formats.h"

namespace fp4serve::model {
namespace {

using kernels::TensorView;
using kernels::WeightView;

// Values of a small float tensor (any float dtype) rounded to bf16, as HF holds them in a bf16 model.
std::vector<float> bf16_values(const LoadedCheckpoint& ck, const std::string& name) {
  const auto t = ck.tensor(name);
  const int64_t n = t.info->numel();
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (t.info->dtype) {
      case DType::kBF16: v = bf16_to_f32(t.data<uint16_t>()[i]); break;
      case DType::kF16: v = f16_to_f32(t.data<uint16_t>()[i]); break;
      case DType::kF32: std::memcpy(&v, t.bytes.data() + 4 * i, 4); break;
      default: throw CheckpointError(name, "expected a float tensor");
    }
    out[static_cast<size_t>(i)] = kernels::round_bf16(v);
  }
  return out;
}

float f32_scalar(const LoadedCheckpoint& ck, const std::string& name, float fallback) {
  if (!ck.has(name)) return fallback;
  const auto t = ck.tensor(name);
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

// A bf16 copy of a float tensor that is not bf16 on disk; the pointer stays valid via `owned`.
const uint16_t* as_bf16(const LoadedCheckpoint& ck, const std::string& name, std::vector<std::shared_ptr<void>>& owned) {
  const auto t = ck.tensor(name);
  if (t.info->dtype == DType::kBF16) return t.data<uint16_t>();
  auto vals = bf16_values(ck, name);
  auto buf = std::make_shared<std::vector<uint16_t>>(vals.size());
  for (size_t i = 0; i < vals.size(); ++i) (*buf)[i] = kernels::f32_to_bf16_bits(vals[i]);
  owned.push_back(buf);
  return buf->data();
}

class Binder {
 public:
  Binder(const LoadedCheckpoint& ck, ModelWeights& w, kernels::Backend& backend)
      : ck_(ck), w_(w), backend_(backend),
        release_([&ck](std::span<const std::byte> range) { ck.files().release_pages(range); }) {
    for (const auto& m : ck.plan().modules) modules_[m.path] = &m;
    for (const auto& m : ck.mtp_plan().modules) modules_[m.path] = &m;
  }

  // The backend's form of a linear. Once it has its own copy (the CPU's panels, a GPU upload) it
  // may drop the checkpoint's pages of the weight: release_pages only touches the file mapping, so
  // converted host copies are never released. `release` false keeps them (the tied lm_head: the
  // embedding lookup reads the same bytes).
  kernels::LinearHandle prepare(const WeightView& v, bool release = true) {
    return backend_.prepare_linear(v, release ? release_ : kernels::ReleaseSource{});
  }

  // A bf16-rounded f32 parameter vector (norms, gating) as a device tensor.
  TensorView params(const std::string& name) {
    auto host = std::make_shared<std::vector<float>>(bf16_values(ck_, name));
    w_.owned.push_back(host);
    return backend_.prepare_tensor(
        TensorView::contiguous(host->data(), DType::kF32, {static_cast<int64_t>(host->size())}));
  }

  const PlannedModule& module(const std::string& path) const {
    auto it = modules_.find(path);
    if (it == modules_.end()) throw CheckpointError(path, "module not in the tensor plan");
    return *it->second;
  }

  // A linear [out, in] stored at `path` in the format the plan gives it.
  kernels::LinearHandle linear(const std::string& path) {
    const PlannedModule& m = module(path);
    return prepare(linear_as(path, m.format, m.out_features, m.in_features));
  }

  WeightView linear_as(const std::string& path, const WeightFormat& f, int64_t out, int64_t in) {
    const std::string p = path + ".";
    switch (f.kind) {
      case WeightFormatKind::kBF16:
        return kernels::bf16_weight(as_bf16(ck_, p + "weight", w_.owned), out, in, p + "weight");
      case WeightFormatKind::kFP8PerTensor:
        return kernels::fp8_tensor_weight(ck_.tensor(p + "weight").data<uint8_t>(), f32_scalar(ck_, p + "weight_scale", 1.0f),
                                          out, in, p + "weight");
      case WeightFormatKind::kFP8Block: {
        const auto s = ck_.tensor(p + "weight_scale_inv");
        return kernels::fp8_block_weight(ck_.tensor(p + "weight").data<uint8_t>(), s.bytes.data(),
                                         s.info->dtype == DType::kBF16, out, in, p + "weight");
      }
      case WeightFormatKind::kNVFP4:
        return kernels::nvfp4_weight(ck_.tensor(p + "weight").data<uint8_t>(), ck_.tensor(p + "weight_scale").data<uint8_t>(),
                                     f32_scalar(ck_, p + "weight_scale_2", 1.0f), out, in, p + "weight");
      case WeightFormatKind::kInt4Gptq: {
        if (!f.sym || f.desc_act) {
          throw CheckpointError(path, "INT4 " + f.name() + " is not supported yet (only symmetric, no act-order)");
        }
        const auto sc = ck_.tensor(p + "scales");
        if (sc.info->dtype != DType::kF16) throw CheckpointError(p + "scales", "INT4 scales must be F16");
        const int group = f.group_size > 0 ? f.group_size : static_cast<int>(in);
        // The backend repacks INT4 into its own layout (the CPU's nibble rows) when it prepares it.
        return kernels::int4_gptq_weight(ck_.tensor(p + "qweight").data<int32_t>(), sc.data<uint16_t>(), out, in,
                                         group, p + "qweight");
      }
    }
    throw CheckpointError(path, "unknown weight format");
  }

  void bind_gdn(int64_t l, const std::string& lp, GatedDeltaNetWeights& g) {
    const ModelConfig& c = ck_.config();
    const std::string p = lp + "linear_attn.";
    if (c.layout != ModelLayout::kQwen3_5Moe) {
      throw CheckpointError(p + "in_proj_qkvz", "the Qwen3-Next fused, head-grouped GDN projections are not supported "
                                                "by the forward pass yet (inspect and the loader do support them)");
    }
    g.in_proj_qkv = linear(p + "in_proj_qkv");
    g.in_proj_z = linear(p + "in_proj_z");
    g.in_proj_b = linear(p + "in_proj_b");
    g.in_proj_a = linear(p + "in_proj_a");
    g.out_proj = linear(p + "out_proj");
    const auto conv = bf16_values(ck_, p + "conv1d.weight");  // [C, 1, Kc] -> [C, Kc]
    auto conv_bf16 = std::make_shared<std::vector<uint16_t>>(conv.size());
    for (size_t i = 0; i < conv.size(); ++i) (*conv_bf16)[i] = kernels::f32_to_bf16_bits(conv[i]);
    w_.owned.push_back(conv_bf16);
    const int64_t Kc = c.linear_conv_kernel_dim;
    g.conv_weight = backend_.prepare_tensor(TensorView::contiguous(
        conv_bf16->data(), DType::kBF16, {static_cast<int64_t>(conv.size()) / Kc, Kc}));
    g.dt_bias = params(p + "dt_bias");
    g.a_log = params(p + "A_log");
    g.norm_weight = params(p + "norm.weight");
    (void)l;
  }

  void bind_attention(const std::string& lp, GatedAttentionWeights& a) {
    const std::string p = lp + "self_attn.";
    a.q_proj = linear(p + "q_proj");
    a.k_proj = linear(p + "k_proj");
    a.v_proj = linear(p + "v_proj");
    a.o_proj = linear(p + "o_proj");
    a.q_norm = params(p + "q_norm.weight");
    a.k_norm = params(p + "k_norm.weight");
    a.k_scale = f32_scalar(ck_, p + "k_proj.k_scale", 1.0f);
    a.v_scale = f32_scalar(ck_, p + "v_proj.v_scale", 1.0f);
  }

  // Host views of the block's weights, prepared by the backend as one MoE.
  kernels::MoeHandle bind_moe(const std::string& lp, ExpertStorage storage) {
    const ModelConfig& c = ck_.config();
    const std::string p = lp + "mlp.";
    kernels::MoeWeights moe;
    const PlannedModule& router = module(p + "gate");
    moe.router = linear_as(p + "gate", router.format, router.out_features, router.in_features);
    moe.top_k = static_cast<int>(c.num_experts_per_tok);
    const int64_t E = c.num_experts, I = c.moe_intermediate_size, H = c.hidden_size;
    const PlannedModule& experts = module(p + "experts");
    moe.experts.resize(static_cast<size_t>(E));
    if (storage == ExpertStorage::kFused) {
      // gate_up_proj [E, 2I, H]: rows [0, I) gate, [I, 2I) up; down_proj [E, H, I].
      const WeightView gu = kernels::bf16_weight(as_bf16(ck_, p + "experts.gate_up_proj", w_.owned), E * 2 * I, H,
                                                 p + "experts.gate_up_proj");
      const WeightView dn = kernels::bf16_weight(as_bf16(ck_, p + "experts.down_proj", w_.owned), E * H, I,
                                                 p + "experts.down_proj");
      for (int64_t e = 0; e < E; ++e) {
        moe.experts[e].gate = kernels::slice_rows(gu, e * 2 * I, I);
        moe.experts[e].up = kernels::slice_rows(gu, e * 2 * I + I, I);
        moe.experts[e].down = kernels::slice_rows(dn, e * H, H);
      }
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string ep = p + "experts." + std::to_string(e) + ".";
        moe.experts[e].gate = linear_as(ep + "gate_proj", experts.format, I, H);
        moe.experts[e].up = linear_as(ep + "up_proj", experts.format, I, H);
        moe.experts[e].down = linear_as(ep + "down_proj", experts.format, H, I);
      }
    }
    moe.has_shared = c.shared_expert_intermediate_size > 0;
    if (moe.has_shared) {
      moe.shared.gate = host_linear(p + "shared_expert.gate_proj");
      moe.shared.up = host_linear(p + "shared_expert.up_proj");
      moe.shared.down = host_linear(p + "shared_expert.down_proj");
      moe.shared_gate = host_linear(p + "shared_expert_gate");
    }
    return backend_.prepare_moe(moe, release_);
  }

  WeightView host_linear(const std::string& path) {
    const PlannedModule& m = module(path);
    return linear_as(path, m.format, m.out_features, m.in_features);
  }

 private:
  const LoadedCheckpoint& ck_;
  ModelWeights& w_;
  kernels::Backend& backend_;
  const kernels::ReleaseSource release_;
  std::unordered_map<std::string, const PlannedModule*> modules_;
};

}  // namespace

ModelWeights bind_model_weights(const LoadedCheckpoint& ck, kernels::Backend& backend) {
  const ModelConfig& c = ck.config();
  ModelWeights w;
  Binder b(ck, w, backend);
  const uint16_t* embed = as_bf16(ck, c.tensor_prefix + "embed_tokens.weight", w.owned);
  w.embed_tokens = backend.prepare_tensor(
      TensorView::contiguous(const_cast<uint16_t*>(embed), DType::kBF16, {c.vocab_size, c.hidden_size}));
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string lp = c.layer_prefix(l);
    L.kind = c.layer_types[static_cast<size_t>(l)];
    L.input_norm = b.params(lp + "input_layernorm.weight");
    L.post_norm = b.params(lp + "post_attention_layernorm.weight");
    if (L.kind == LayerKind::kFullAttention) {
      b.bind_attention(lp, L.attn);
    } else {
      b.bind_gdn(l, lp, L.gdn);
    }
    L.moe = b.bind_moe(lp, ck.expert_storage());
  }
  w.final_norm = b.params(c.tensor_prefix + "norm.weight");
  w.lm_head = c.tie_word_embeddings
                  ? b.prepare(kernels::bf16_weight(embed, c.vocab_size, c.hidden_size, "embed_tokens"), false)
                  : b.linear("lm_head");
  w.gdn_dims.Hk = static_cast<int>(c.linear_num_key_heads);
  w.gdn_dims.Hv = static_cast<int>(c.linear_num_value_heads);
  w.gdn_dims.dk = static_cast<int>(c.linear_key_head_dim);
  w.gdn_dims.dv = static_cast<int>(c.linear_value_head_dim);
  w.gdn_dims.conv_kernel = static_cast<int>(c.linear_conv_kernel_dim);
  w.rope.head_dim = static_cast<int>(c.head_dim);
  w.rope.rotary_dim = static_cast<int>(c.rotary_dim());
  w.rope.theta = static_cast<float>(c.rope_theta);
  for (int i = 0; i < 3; ++i) {
    w.rope.sections[i] = i < static_cast<int>(c.mrope_section.size()) ? static_cast<int>(c.mrope_section[i]) : 0;
  }
  if (c.mrope_section.empty()) w.rope.sections[0] = w.rope.rotary_dim / 2;  // plain RoPE: all dims on T
  return w;
}

MtpWeights bind_mtp_weights(const LoadedCheckpoint& ck, kernels::Backend& backend, ModelWeights& w) {
  if (!ck.has_mtp()) throw CheckpointError(ck.directory().string(), ck.mtp_unavailable_reason());
  MtpWeights m;
  Binder b(ck, w, backend);
  m.pre_fc_norm_embedding = b.params("mtp.pre_fc_norm_embedding.weight");
  m.pre_fc_norm_hidden = b.params("mtp.pre_fc_norm_hidden.weight");
  m.fc = b.linear("mtp.fc");
  const std::string lp = "mtp.layers.0.";
  m.layer.kind = LayerKind::kFullAttention;
  m.layer.input_norm = b.params(lp + "input_layernorm.weight");
  m.layer.post_norm = b.params(lp + "post_attention_layernorm.weight");
  b.bind_attention(lp, m.layer.attn);
  m.layer.moe = b.bind_moe(lp, ck.mtp_expert_storage());
  m.norm = b.params("mtp.norm.weight");
  return m;
}

}  // namespace fp4serve::model
