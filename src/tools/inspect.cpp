// `fp4serve inspect MODEL`: what a checkpoint is and what serving it costs, from its files alone —
// architecture, layer plan, the format of each module, weight bytes, KV bytes per token, GDN state
// bytes per sequence and the bytes of weights read to decode one token at batch 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>

#include "checkpoint/tensor_plan.h"
#include "checkpoint/weight_loader.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "tools/commands.h"
#include "tools/model_source.h"

namespace fp4serve::tools {
namespace {

std::string human_bytes(uint64_t b) {
  const double d = static_cast<double>(b);
  if (d >= 1e9) return fmt::format("{:.3f} GB", d / 1e9);
  if (d >= 1e6) return fmt::format("{:.3f} MB", d / 1e6);
  if (d >= 1e3) return fmt::format("{:.3f} kB", d / 1e3);
  return fmt::format("{} B", b);
}

// "model.language_model.layers.7.self_attn.q_proj" -> "self_attn.q_proj"; global modules keep
// their last component ("embed_tokens", "norm", "lm_head").
std::string module_class(const ModelConfig& c, const PlannedModule& m) {
  if (m.layer >= 0) return m.path.substr(c.layer_prefix(m.layer).size());
  const auto dot = m.path.rfind('.');
  return dot == std::string::npos ? m.path : m.path.substr(dot + 1);
}

std::string format_label(const PlannedModule& m) {
  if (m.kind == ModuleKind::kDense || m.kind == ModuleKind::kEmbedding) {
    std::string dtypes;
    for (const auto& t : m.tensors) {
      const std::string d(dtype_name(t.dtype));
      if (dtypes.find(d) == std::string::npos) dtypes += (dtypes.empty() ? "" : "+") + d;
    }
    return "dense " + dtypes;
  }
  return m.format.name();
}

void print_layer_plan(const ModelConfig& c) {
  std::string plan;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) plan += c.is_full_attention(l) ? 'F' : 'L';
  std::string full;
  for (int64_t l : c.full_attention_layers()) full += (full.empty() ? "" : ",") + std::to_string(l);
  std::printf("layer plan: %lld layers, %lld linear_attention (L) + %lld full_attention (F)\n  %s\n"
              "  full attention at layers {%s}\n",
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.num_linear_attention_layers()),
              static_cast<long long>(c.num_full_attention_layers()), plan.c_str(), full.c_str());
}

// The MTP block (speculative decoding's drafter): what it holds, or why it cannot be used.
void print_mtp(const LoadedCheckpoint& ck) {
  if (!ck.has_mtp()) {
    std::printf("MTP: not usable for speculative decoding: %s\n", ck.mtp_unavailable_reason().c_str());
    return;
  }
  const TensorPlan& p = ck.mtp_plan();
  std::string formats;
  for (const auto& m : p.modules) {
    if (m.kind != ModuleKind::kLinear && m.kind != ModuleKind::kRoutedExperts) continue;
    if (formats.find(m.format.name()) == std::string::npos) formats += (formats.empty() ? "" : ", ") + m.format.name();
  }
  std::printf("MTP: %zu mtp.* tensors, 1 full-attention layer + MoE (experts %s), %s: weight bytes %llu (%s), "
              "active bytes per draft token %llu + the shared lm_head's; KV bytes per token %llu (bf16)\n",
              ck.mtp_tensors_on_disk(), ck.mtp_expert_storage() == ExpertStorage::kFused ? "fused 3-D" : "per expert",
              formats.c_str(), static_cast<unsigned long long>(p.total_bytes()), human_bytes(p.total_bytes()).c_str(),
              static_cast<unsigned long long>(p.active_bytes_per_token()),
              static_cast<unsigned long long>(2 * 2 * ck.config().kv_dim()));
}

void print_modules(const ModelConfig& c, const TensorPlan& plan) {
  struct Row {
    int count = 0;
    uint64_t bytes = 0;
    uint64_t active = 0;
  };
  // Keyed by (class, format) so that a class split across formats shows both lines.
  std::map<std::pair<std::string, std::string>, Row> rows;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& m : plan.modules) {
    auto key = std::make_pair(module_class(c, m), format_label(m));
    if (!rows.count(key)) order.push_back(key);
    auto& r = rows[key];
    r.count += 1;
    r.bytes += m.byte_size();
    r.active += static_cast<uint64_t>(static_cast<double>(m.byte_size()) * m.active_fraction + 0.5);
  }
  std::printf("modules (format of each, bytes on disk, bytes read per decoded token):\n");
  std::printf("  %-36s %5s  %-22s %14s %14s\n", "module", "count", "format", "bytes", "active/token");
  for (const auto& key : order) {
    const auto& r = rows[key];
    std::printf("  %-36s %5d  %-22s %14s %14s\n", key.first.c_str(), r.count, key.second.c_str(),
                human_bytes(r.bytes).c_str(), human_bytes(r.active).c_str());
  }
}

// The vision tower's tensors (model.visual.*) and the shape its vision_config gives them.
void print_vision(const LoadedCheckpoint& ck) {
  size_t count = 0;
  uint64_t bytes = 0;
  std::map<std::string, size_t> dtypes;
  for (const auto& name : ck.files().tensor_names()) {
    if (name.rfind(model::kVisionPrefix, 0) != 0) continue;
    const auto* info = ck.files().find(name).info;
    ++count;
    bytes += info->byte_size;
    ++dtypes[std::string(dtype_name(info->dtype))];
  }
  const auto config = model::VisionConfig::load(ck.directory());
  if (!config && count == 0) {
    std::printf("vision tower: none\n");
    return;
  }
  std::string kinds;
  for (const auto& [dt, n] : dtypes) kinds += (kinds.empty() ? "" : ", ") + std::to_string(n) + " " + dt;
  std::printf("vision tower: %zu tensors (%s), %s", count, kinds.empty() ? "none" : kinds.c_str(), human_bytes(bytes).c_str());
  if (config)
    std::printf("; depth %lld, hidden %lld, %lld heads, mlp %lld, patch %lld, merge %lld -> %lld",
                static_cast<long long>(config->depth), static_cast<long long>(config->hidden_size),
                static_cast<long long>(config->num_heads), static_cast<long long>(config->intermediate_size),
                static_cast<long long>(config->patch_size), static_cast<long long>(config->spatial_merge_size),
                static_cast<long long>(config->out_hidden_size));
  std::printf("\n");
}

void run_inspect(const std::string& model, const ModelSourceFlags& source) {
  const LoadedCheckpoint ck = LoadedCheckpoint::open(resolve_model_dir(model, source), LoadOptions{});
  const ModelConfig& c = ck.config();
  std::printf("model: %s\n", ck.directory().c_str());
  std::printf("architecture: %s (model_type %s, text %s, layout %s)\n", c.architecture.c_str(), c.model_type.c_str(),
              c.text_model_type.c_str(), std::string(model_layout_name(c.layout)).c_str());
  std::printf("%s\n", c.describe().c_str());
  print_layer_plan(c);
  std::printf("%s\n", ck.quant_config().describe().c_str());
  std::printf("experts stored: %s\n", ck.expert_storage() == ExpertStorage::kFused ? "fused 3-D" : "per expert");
  print_modules(c, ck.plan());
  const auto& plan = ck.plan();
  std::printf("weight bytes: %llu (%s) in %zu files of %s; %zu tensors not used by the text model (MTP, vision)\n",
              static_cast<unsigned long long>(plan.total_bytes()), human_bytes(plan.total_bytes()).c_str(),
              ck.files().files().size(), human_bytes(ck.file_bytes()).c_str(), ck.known_unused_tensors());
  const uint64_t kv16 = kv_cache_bytes_per_token(c, 2), kv8 = kv_cache_bytes_per_token(c, 1);
  std::printf("KV bytes per token: bf16 %llu, fp8 %llu (%lld full-attention layers x K,V x %lld kv heads x %lld dims)\n",
              static_cast<unsigned long long>(kv16), static_cast<unsigned long long>(kv8),
              static_cast<long long>(c.num_full_attention_layers()), static_cast<long long>(c.num_key_value_heads),
              static_cast<long long>(c.head_dim));
  const uint64_t gdn = gdn_state_bytes_per_sequence(c);
  std::printf("GDN state bytes per sequence: %llu (%.2f MiB: %lld layers x (fp32 %lldx%lldx%lld + conv bf16 %lldx%lld))\n",
              static_cast<unsigned long long>(gdn), static_cast<double>(gdn) / (1 << 20),
              static_cast<long long>(c.num_linear_attention_layers()), static_cast<long long>(c.linear_num_value_heads),
              static_cast<long long>(c.linear_key_head_dim), static_cast<long long>(c.linear_value_head_dim),
              static_cast<long long>(c.linear_conv_dim()), static_cast<long long>(c.linear_conv_kernel_dim - 1));
  std::printf("active bytes per token: %llu\n", static_cast<unsigned long long>(plan.active_bytes_per_token()));
  print_mtp(ck);
  print_vision(ck);
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "describe a checkpoint: layers, formats, bytes, KV and state sizes");
  auto model = std::make_shared<std::string>();
  auto source = std::make_shared<ModelSourceFlags>();
  cmd->add_option("MODEL", *model, "model directory or Hugging Face id (downloaded unless HF_HUB_OFFLINE=1)")->required();
  add_model_source_flags(*cmd, *source);
  cmd->callback([model, source] { run_inspect(*model, *source); });
}

}  // namespace fp4serve::tools
