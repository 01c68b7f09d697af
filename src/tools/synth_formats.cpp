#include "tools/synth_formats.h"

#include <algorithm>
#include <stdexcept>

namespace fp4serve::synth {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kModelOptVersion = "0.43.0";
constexpr const char* kAutoRoundVersion = "0.8.0";
constexpr int kNvfp4Group = 16;
constexpr int kInt4Group = 128;

std::string_view leaf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

bool has(std::string_view path, std::string_view part) { return path.find(part) != std::string_view::npos; }

bool is_ffn_proj(std::string_view l) { return l == "gate_proj" || l == "up_proj" || l == "down_proj"; }
bool is_routed_expert_proj(std::string_view p) { return has(p, ".mlp.experts.") && is_ffn_proj(leaf(p)); }
bool is_shared_expert_proj(std::string_view p) { return has(p, ".mlp.shared_expert.") && is_ffn_proj(leaf(p)); }
bool is_attention_proj(std::string_view p) {
  const auto l = leaf(p);
  return has(p, ".self_attn.") && (l == "q_proj" || l == "k_proj" || l == "v_proj" || l == "o_proj");
}
bool is_gdn_big_proj(std::string_view p) {
  const auto l = leaf(p);
  return has(p, ".linear_attn.") && (l == "in_proj_qkv" || l == "in_proj_z" || l == "out_proj");
}
bool is_router(std::string_view p) { return p.ends_with(".mlp.gate"); }
bool is_shared_expert_gate(std::string_view p) { return p.ends_with(".mlp.shared_expert_gate"); }
bool in_decoder_layers(std::string_view p) { return p.starts_with("model.language_model.layers."); }

WeightFormat nvfp4_w4a16() { return WeightFormat::nvfp4(kNvfp4Group, /*w4a4=*/false); }
WeightFormat fp8_static() { return WeightFormat::fp8_per_tensor(/*static_activation_scale=*/true); }
WeightFormat fp8_block() { return WeightFormat::fp8_block(128, 128); }
WeightFormat int4_autoround() {
  return WeightFormat::int4_gptq(kInt4Group, /*sym=*/true, /*desc_act=*/false, Int4ZeroConvention::kV1MinusOne);
}

// The linear modules of the plan with the format the resolver gave them, routed experts as their
// aggregate path ("...mlp.experts"), in plan order (the model's module order).
std::vector<const PlannedModule*> weight_modules(const TensorPlan& plan) {
  std::vector<const PlannedModule*> out;
  for (const auto& m : plan.modules) {
    if (m.kind == ModuleKind::kLinear || m.kind == ModuleKind::kRoutedExperts) out.push_back(&m);
  }
  return out;
}

// ModelOpt's per-layer entry (process_layer_quant_config).
ordered_json modelopt_layer_entry(const WeightFormat& f) {
  if (f.kind == WeightFormatKind::kNVFP4) {
    return {{"quant_algo", f.activations_quantized ? "NVFP4" : "W4A16_NVFP4"}, {"group_size", f.group_size}};
  }
  return {{"quant_algo", "FP8"}};
}

// _quant_algo_to_group_config of convert_hf_config.py, for the algorithms this recipe uses.
json modelopt_group_config(const ordered_json& entry) {
  const std::string algo = entry["quant_algo"];
  const json float8 = {{"dynamic", false}, {"num_bits", 8}, {"type", "float"}};
  if (algo == "FP8") return {{"input_activations", float8}, {"weights", float8}};
  const int gs = entry.value("group_size", kNvfp4Group);
  const json fp4 = {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", gs}};
  if (algo == "NVFP4") return {{"input_activations", fp4}, {"weights", fp4}};
  return {{"weights", fp4}};  // W4A16_NVFP4: weights only
}

QuantFiles modelopt_files(const TensorPlan& plan) {
  ordered_json layers = ordered_json::object();
  for (const PlannedModule* m : weight_modules(plan)) {
    if (m->format.is_quantized()) layers[m->path] = modelopt_layer_entry(m->format);
  }
  const ordered_json producer = {{"name", "modelopt"}, {"version", kModelOptVersion}};
  // hf_quant_config.json (get_quant_config + process_layer_quant_config; json.dump(indent=4)).
  ordered_json hf = {{"producer", producer},
                     {"quantization",
                      {{"quant_algo", "MIXED_PRECISION"}, {"kv_cache_quant_algo", "FP8"}, {"quantized_layers", layers}}}};
  // config.json quantization_config (convert_hf_quant_config_format): one config group per distinct
  // per-layer entry, numbered in order of first appearance, targets sorted.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // entry dump -> layers
  for (const auto& [name, entry] : layers.items()) {
    const std::string key = entry.dump();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(name);
  }
  json config_groups = json::object();
  for (size_t i = 0; i < groups.size(); ++i) {
    json g = modelopt_group_config(ordered_json::parse(groups[i].first));
    std::vector<std::string> targets = groups[i].second;
    std::sort(targets.begin(), targets.end());
    g["targets"] = targets;
    config_groups["group_" + std::to_string(i)] = g;
  }
  json section = {{"config_groups", config_groups},
                  {"ignore", json::array()},
                  {"kv_cache_scheme", {{"dynamic", false}, {"num_bits", 8}, {"type", "float"}}},
                  {"producer", json::parse(producer.dump())},
                  {"quant_algo", "MIXED_PRECISION"},
                  {"quant_method", "modelopt"},
                  {"quantized_layers", json::parse(layers.dump())}};
  return {section, {{"hf_quant_config.json", hf.dump(4)}}};
}

QuantFiles qwen_fp8_files(const TensorPlan& plan) {
  std::vector<std::string> keep;
  for (const auto& m : plan.modules) {
    const std::string_view l = leaf(m.path);
    if (m.path == "lm_head" || l == "embed_tokens" || l == "conv1d" ||
        (m.kind == ModuleKind::kLinear && (l == "in_proj_a" || l == "in_proj_b"))) {
      keep.push_back(m.path);
    }
  }
  std::sort(keep.begin(), keep.end());
  json section = {{"activation_scheme", "dynamic"},
                  {"fmt", "e4m3"},
                  {"modules_to_not_convert", keep},
                  {"quant_method", "fp8"},
                  {"weight_block_size", {128, 128}}};
  return {section, {}};
}

QuantFiles autoround_files(const TensorPlan& plan) {
  json extra = json::object();
  for (const PlannedModule* m : weight_modules(plan)) {
    if (in_decoder_layers(m->path) && !m->format.is_quantized()) {
      extra[m->path] = {{"bits", 16}, {"data_type", "float"}};
    }
  }
  json section = {{"autoround_version", kAutoRoundVersion},
                  {"bits", 4},
                  {"block_name_to_quantize", "model.language_model.layers"},
                  {"data_type", "int"},
                  {"group_size", kInt4Group},
                  {"packing_format", "auto_round:auto_gptq"},
                  {"quant_method", "auto-round"},
                  {"sym", true}};
  if (!extra.empty()) section["extra_config"] = extra;
  return {section, {{"quantization_config.json", section.dump(2)}}};
}

}  // namespace

std::optional<SynthFormat> parse_synth_format(std::string_view name) {
  if (name == "bf16") return SynthFormat::kBF16;
  if (name == "fp8") return SynthFormat::kFP8;
  if (name == "nvfp4") return SynthFormat::kNVFP4;
  if (name == "int4") return SynthFormat::kInt4;
  return std::nullopt;
}

std::string_view synth_format_name(SynthFormat format) {
  switch (format) {
    case SynthFormat::kBF16: return "bf16";
    case SynthFormat::kFP8: return "fp8";
    case SynthFormat::kNVFP4: return "nvfp4";
    case SynthFormat::kInt4: return "int4";
  }
  return "?";
}

ExpertStorage expert_storage_for(SynthFormat format) {
  return format == SynthFormat::kBF16 ? ExpertStorage::kFused : ExpertStorage::kPerExpert;
}

WeightFormat release_format(SynthFormat format, std::string_view p) {
  switch (format) {
    case SynthFormat::kBF16:
      return WeightFormat::bf16();
    case SynthFormat::kFP8:
      if (is_routed_expert_proj(p) || is_shared_expert_proj(p) || is_attention_proj(p) || is_gdn_big_proj(p)) {
        return fp8_block();
      }
      return WeightFormat::bf16();
    case SynthFormat::kNVFP4:
      if (is_routed_expert_proj(p) || is_shared_expert_proj(p) || p == "lm_head") return nvfp4_w4a16();
      if (is_attention_proj(p) || is_gdn_big_proj(p)) return fp8_static();
      return WeightFormat::bf16();
    case SynthFormat::kInt4:
      if (in_decoder_layers(p) && !is_router(p) && !is_shared_expert_gate(p)) return int4_autoround();
      return WeightFormat::bf16();
  }
  throw std::logic_error("release_format: unknown format");
}

FormatResolver release_resolver(SynthFormat format) {
  return [format](std::string_view path) { return release_format(format, path); };
}

QuantFiles quant_files_for(SynthFormat format, const TensorPlan& plan) {
  switch (format) {
    case SynthFormat::kBF16: return {};
    case SynthFormat::kFP8: return qwen_fp8_files(plan);
    case SynthFormat::kNVFP4: return modelopt_files(plan);
    case SynthFormat::kInt4: return autoround_files(plan);
  }
  throw std::logic_error("quant_files_for: unknown format");
}

}  // namespace fp4serve::synth
