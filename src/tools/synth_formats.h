// What each `fp4serve synth --format` writes: the storage of every module as the matching real
// release has it, and that release's quantization files. One resolver per format decides the
// format of every linear module; the quantization files are generated from the same answers, so a
// QuantConfig parsed from them must give the same answers back (tests/unit/tools/synth_test.cpp).
//
//   bf16   Qwen/Qwen3.6-35B-A3B: fused 3-D experts, no quantization config.
//   fp8    Qwen/Qwen3.6-35B-A3B-FP8: block FP8 128x128 (weight F8_E4M3 + weight_scale_inv BF16) on
//          the attention and GDN q/k/v/z/out projections, shared and routed experts (per expert);
//          lm_head, router, shared_expert_gate, in_proj_a/b, conv1d, norms stay BF16.
//          config.json quantization_config {quant_method fp8, fmt e4m3, activation_scheme dynamic,
//          weight_block_size [128,128], modules_to_not_convert [...]} (the list as Qwen writes it:
//          lm_head, embed_tokens and each GDN layer's conv1d / in_proj_a / in_proj_b).
//   nvfp4  nvidia/Qwen3.6-35B-A3B-NVFP4, ModelOpt recipe w4a16_nvfp4-fp8_attn-kv_fp8_cast
//          (docs/quant-formats.md §2.3): W4A16 NVFP4 routed + shared experts and lm_head, FP8 per-tensor
//          W8A8 attention q/k/v/o and GDN in_proj_qkv / in_proj_z / out_proj, the rest BF16, KV FP8.
//          hf_quant_config.json (MIXED_PRECISION, quantized_layers) and config.json
//          quantization_config (convert_hf_quant_config_format: config_groups, quantized_layers).
//   int4   Intel AutoRound W4A16 (sym, group 128, packing auto_round:auto_gptq): AutoRound's default
//          on this model quantizes every linear inside model.language_model.layers except the MoE
//          routers (mlp.gate, ignored for MoE models) and shared_expert_gate (one output row, not
//          packable); those two are listed in extra_config as {"bits": 16, "data_type": "float"}.
//          lm_head and embeddings stay BF16. quantization_config in config.json and, as AutoRound
//          also writes it, quantization_config.json.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/tensor_plan.h"
#include "tensor/weight_format.h"

namespace fp4serve::synth {

enum class SynthFormat : uint8_t { kBF16, kFP8, kNVFP4, kInt4 };

std::optional<SynthFormat> parse_synth_format(std::string_view name);  // "bf16" "fp8" "nvfp4" "int4"
std::string_view synth_format_name(SynthFormat format);

ExpertStorage expert_storage_for(SynthFormat format);

// The format the real release stores the linear module `module_path` in (HF name without
// ".weight"; for routed experts the path of one expert's projection).
WeightFormat release_format(SynthFormat format, std::string_view module_path);
FormatResolver release_resolver(SynthFormat format);

// The quantization files of a checkpoint with this plan: config.json's quantization_config (null
// for bf16) and any extra files (name, text).
struct QuantFiles {
  nlohmann::json config_section;
  std::vector<std::pair<std::string, std::string>> extra_files;
};
QuantFiles quant_files_for(SynthFormat format, const TensorPlan& plan);

}  // namespace fp4serve::synth
