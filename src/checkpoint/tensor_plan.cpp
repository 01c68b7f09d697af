#include "checkpoint/tensor_plan.h"

#include <stdexcept>

#include "checkpoint/checkpoint_error.h"

namespace fp4serve {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

PlannedTensor dense(std::string name, DType dtype, std::vector<int64_t> shape,
                    std::vector<DType> also = {}) {
  PlannedTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.also_accepted = std::move(also);
  return t;
}

PlannedTensor scalar_f32(std::string name, bool optional) {
  PlannedTensor t = dense(std::move(name), DType::kF32, {});
  t.optional = optional;
  return t;
}

// A module appender that keeps make_tensor_plan readable.
class PlanBuilder {
 public:
  PlanBuilder(const FormatResolver& format_of, TensorPlan& plan) : format_of_(format_of), plan_(plan) {}

  void linear(const std::string& path, int64_t layer, int64_t out, int64_t in) {
    PlannedModule m;
    m.path = path;
    m.kind = ModuleKind::kLinear;
    m.format = format_of_(path);
    m.layer = layer;
    m.out_features = out;
    m.in_features = in;
    m.tensors = linear_tensors(path, m.format, out, in);
    plan_.modules.push_back(std::move(m));
  }

  void dense_module(const std::string& path, int64_t layer, std::vector<PlannedTensor> tensors) {
    PlannedModule m;
    m.path = path;
    m.kind = ModuleKind::kDense;
    m.layer = layer;
    m.tensors = std::move(tensors);
    plan_.modules.push_back(std::move(m));
  }

  PlannedModule& last() { return plan_.modules.back(); }
  const FormatResolver& format_of() const { return format_of_; }
  TensorPlan& plan() { return plan_; }

 private:
  const FormatResolver& format_of_;
  TensorPlan& plan_;
};

void add_gated_deltanet(PlanBuilder& b, const ModelConfig& c, int64_t l, const std::string& lp) {
  const std::string p = lp + "linear_attn.";
  const int64_t H = c.hidden_size, hv = c.linear_num_value_heads;
  if (c.layout == ModelLayout::kQwen3Next) {
    // Fused and grouped per key head (docs/model-arch.md §4.3).
    b.linear(p + "in_proj_qkvz", l, 2 * c.linear_key_dim() + 2 * c.linear_value_dim(), H);
    b.linear(p + "in_proj_ba", l, 2 * hv, H);
  } else {
    b.linear(p + "in_proj_qkv", l, c.linear_conv_dim(), H);
    b.linear(p + "in_proj_z", l, c.linear_value_dim(), H);
    b.linear(p + "in_proj_b", l, hv, H);
    b.linear(p + "in_proj_a", l, hv, H);
  }
  // A_log and the gated norm's weight are F32 in the BF16 release; a checkpoint saved from a bf16
  // model in memory has them in bf16.
  b.dense_module(p + "conv1d", l,
                 {dense(p + "conv1d.weight", DType::kBF16, {c.linear_conv_dim(), 1, c.linear_conv_kernel_dim},
                        {DType::kF16, DType::kF32})});
  b.dense_module(p + "gating", l,
                 {dense(p + "dt_bias", DType::kBF16, {hv}, {DType::kF16, DType::kF32}),
                  dense(p + "A_log", DType::kF32, {hv}, {DType::kBF16, DType::kF16})});
  b.dense_module(p + "norm", l,
                 {dense(p + "norm.weight", DType::kF32, {c.linear_value_head_dim}, {DType::kBF16, DType::kF16})});
  b.linear(p + "out_proj", l, H, c.linear_value_dim());
}

void add_gated_attention(PlanBuilder& b, const ModelConfig& c, int64_t l, const std::string& lp,
                         bool kv_cache_scales) {
  const std::string p = lp + "self_attn.";
  const int64_t H = c.hidden_size;
  b.linear(p + "q_proj", l, c.q_proj_out(), H);
  b.linear(p + "k_proj", l, c.kv_dim(), H);
  if (kv_cache_scales) b.last().tensors.push_back(scalar_f32(p + "k_proj.k_scale", true));
  b.linear(p + "v_proj", l, c.kv_dim(), H);
  if (kv_cache_scales) b.last().tensors.push_back(scalar_f32(p + "v_proj.v_scale", true));
  b.linear(p + "o_proj", l, H, c.num_attention_heads * c.head_dim);
  b.dense_module(p + "qk_norm", l,
                 {dense(p + "q_norm.weight", DType::kBF16, {c.head_dim}, {DType::kF16, DType::kF32}),
                  dense(p + "k_norm.weight", DType::kBF16, {c.head_dim}, {DType::kF16, DType::kF32})});
}

void add_routed_experts(PlanBuilder& b, const ModelConfig& c, int64_t l, const std::string& lp,
                        ExpertStorage storage) {
  const std::string p = lp + "mlp.experts";
  const int64_t E = c.num_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  PlannedModule m;
  m.path = p;
  m.kind = ModuleKind::kRoutedExperts;
  m.layer = l;
  m.num_experts = E;
  m.out_features = I;
  m.in_features = H;
  m.active_fraction = static_cast<double>(c.num_experts_per_tok) / static_cast<double>(E);
  m.format = b.format_of()(p + ".0.gate_proj");
  if (storage == ExpertStorage::kFused) {
    if (m.format.is_quantized()) {
      throw CheckpointError(p, "fused expert tensors are only known unquantized, but the quantization config says " +
                                   m.format.name());
    }
    m.tensors = {dense(p + ".gate_up_proj", DType::kBF16, {E, 2 * I, H}, {DType::kF16, DType::kF32}),
                 dense(p + ".down_proj", DType::kBF16, {E, H, I}, {DType::kF16, DType::kF32})};
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string ep = p + "." + std::to_string(e) + ".";
      for (const char* proj : {"gate_proj", "up_proj"}) {
        auto t = linear_tensors(ep + proj, m.format, I, H);
        m.tensors.insert(m.tensors.end(), t.begin(), t.end());
      }
      auto t = linear_tensors(ep + "down_proj", m.format, H, I);
      m.tensors.insert(m.tensors.end(), t.begin(), t.end());
    }
  }
  b.plan().modules.push_back(std::move(m));
}

void add_moe(PlanBuilder& b, const ModelConfig& c, int64_t l, const std::string& lp, ExpertStorage storage) {
  const std::string p = lp + "mlp.";
  const int64_t H = c.hidden_size, Is = c.shared_expert_intermediate_size;
  b.linear(p + "gate", l, c.num_experts, H);  // router
  add_routed_experts(b, c, l, lp, storage);
  if (Is > 0) {
    b.linear(p + "shared_expert.gate_proj", l, Is, H);
    b.linear(p + "shared_expert.up_proj", l, Is, H);
    b.linear(p + "shared_expert.down_proj", l, H, Is);
    b.linear(p + "shared_expert_gate", l, 1, H);
  }
}

}  // namespace

uint64_t PlannedTensor::byte_size() const { return numel(shape) * dtype_size(dtype); }

uint64_t PlannedModule::byte_size() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.byte_size();
  return n;
}

uint64_t TensorPlan::total_bytes() const {
  uint64_t n = 0;
  for (const auto& m : modules) n += m.byte_size();
  return n;
}

uint64_t TensorPlan::active_bytes_per_token() const {
  double n = 0;
  for (const auto& m : modules) n += static_cast<double>(m.byte_size()) * m.active_fraction;
  return static_cast<uint64_t>(n + 0.5);
}

std::vector<const PlannedTensor*> TensorPlan::all_tensors() const {
  std::vector<const PlannedTensor*> out;
  for (const auto& m : modules)
    for (const auto& t : m.tensors) out.push_back(&t);
  return out;
}

std::vector<PlannedTensor> linear_tensors(const std::string& path, const WeightFormat& f, int64_t out, int64_t in) {
  const std::string p = path + ".";
  switch (f.kind) {
    case WeightFormatKind::kBF16:
      return {dense(p + "weight", DType::kBF16, {out, in}, {DType::kF16, DType::kF32})};
    case WeightFormatKind::kFP8PerTensor:
      return {dense(p + "weight", DType::kF8E4M3, {out, in}), scalar_f32(p + "weight_scale", false),
              scalar_f32(p + "input_scale", !f.activations_static)};
    case WeightFormatKind::kFP8Block: {
      const int br = f.block_rows > 0 ? f.block_rows : 128, bc = f.block_cols > 0 ? f.block_cols : 128;
      return {dense(p + "weight", DType::kF8E4M3, {out, in}),
              dense(p + "weight_scale_inv", DType::kF32, {ceil_div(out, br), ceil_div(in, bc)}, {DType::kBF16})};
    }
    case WeightFormatKind::kNVFP4: {
      const int g = f.group_size > 0 ? f.group_size : 16;
      if (in % g != 0) throw CheckpointError(path, "NVFP4 needs in_features divisible by " + std::to_string(g));
      return {dense(p + "weight", DType::kU8, {out, in / 2}), dense(p + "weight_scale", DType::kF8E4M3, {out, in / g}),
              scalar_f32(p + "weight_scale_2", false), scalar_f32(p + "input_scale", !f.activations_quantized)};
    }
    case WeightFormatKind::kInt4Gptq: {
      const int64_t g = f.group_size > 0 ? f.group_size : in;
      if (in % g != 0 || in % 8 != 0 || out % 8 != 0) {
        throw CheckpointError(path, "INT4 GPTQ needs in_features divisible by the group size and by 8, out by 8");
      }
      PlannedTensor g_idx = dense(p + "g_idx", DType::kI32, {in});
      g_idx.optional = !f.desc_act;
      return {dense(p + "qweight", DType::kI32, {in / 8, out}), dense(p + "qzeros", DType::kI32, {in / g, out / 8}),
              dense(p + "scales", DType::kF16, {in / g, out}, {DType::kBF16}), g_idx};
    }
  }
  throw std::logic_error("linear_tensors: unknown format");
}

TensorPlan make_tensor_plan(const ModelConfig& c, const FormatResolver& format_of, ExpertStorage experts,
                            bool kv_cache_scales) {
  TensorPlan plan;
  PlanBuilder b(format_of, plan);
  const std::string& P = c.tensor_prefix;
  const int64_t H = c.hidden_size;

  {
    PlannedModule m;
    m.path = P + "embed_tokens";
    m.kind = ModuleKind::kEmbedding;
    m.tensors = {dense(P + "embed_tokens.weight", DType::kBF16, {c.vocab_size, H}, {DType::kF16, DType::kF32})};
    // One row per token; with tied embeddings the lm_head is this same table and reads all of it.
    m.active_fraction = c.tie_word_embeddings ? 1.0 : 1.0 / static_cast<double>(c.vocab_size);
    plan.modules.push_back(std::move(m));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string lp = c.layer_prefix(l);
    b.dense_module(lp + "layernorms", l,
                   {dense(lp + "input_layernorm.weight", DType::kBF16, {H}, {DType::kF16, DType::kF32}),
                    dense(lp + "post_attention_layernorm.weight", DType::kBF16, {H}, {DType::kF16, DType::kF32})});
    if (c.is_full_attention(l)) {
      add_gated_attention(b, c, l, lp, kv_cache_scales);
    } else {
      add_gated_deltanet(b, c, l, lp);
    }
    add_moe(b, c, l, lp, experts);
  }
  b.dense_module(P + "norm", -1, {dense(P + "norm.weight", DType::kBF16, {H}, {DType::kF16, DType::kF32})});
  if (!c.tie_word_embeddings) b.linear("lm_head", -1, c.vocab_size, H);
  return plan;
}

TensorPlan make_mtp_plan(const ModelConfig& c, const FormatResolver& format_of, ExpertStorage experts,
                         bool kv_cache_scales) {
  TensorPlan plan;
  PlanBuilder b(format_of, plan);
  const int64_t H = c.hidden_size;
  const int64_t l = c.num_hidden_layers;  // vLLM numbers the MTP layer after the trunk (mtp_start_layer_idx)
  auto norm = [&](const std::string& name) {
    b.dense_module(name, l, {dense(name + ".weight", DType::kBF16, {H}, {DType::kF16, DType::kF32})});
  };
  norm("mtp.pre_fc_norm_embedding");
  norm("mtp.pre_fc_norm_hidden");
  b.linear("mtp.fc", l, H, 2 * H);  // input is concat(embedding, hidden): the embedding half first
  const std::string lp = "mtp.layers.0.";
  b.dense_module(lp + "layernorms", l,
                 {dense(lp + "input_layernorm.weight", DType::kBF16, {H}, {DType::kF16, DType::kF32}),
                  dense(lp + "post_attention_layernorm.weight", DType::kBF16, {H}, {DType::kF16, DType::kF32})});
  add_gated_attention(b, c, l, lp, kv_cache_scales);
  add_moe(b, c, l, lp, experts);
  norm("mtp.norm");
  return plan;
}

bool is_known_unused_tensor(std::string_view name) {
  return name.starts_with("mtp.") || name.starts_with("model.visual.") || name.starts_with("visual.");
}

uint64_t kv_cache_bytes_per_token(const ModelConfig& c, uint64_t element_bytes) {
  return static_cast<uint64_t>(c.num_full_attention_layers()) * 2 * static_cast<uint64_t>(c.kv_dim()) * element_bytes;
}

uint64_t gdn_state_bytes_per_sequence(const ModelConfig& c) {
  const uint64_t recurrent = static_cast<uint64_t>(c.linear_num_value_heads * c.linear_key_head_dim *
                                                   c.linear_value_head_dim) * 4;
  const uint64_t conv = static_cast<uint64_t>(c.linear_conv_dim() * (c.linear_conv_kernel_dim - 1)) * 2;
  return static_cast<uint64_t>(c.num_linear_attention_layers()) * (recurrent + conv);
}

}  // namespace fp4serve
