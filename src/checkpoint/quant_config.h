// Which quantization format each linear module of a checkpoint is stored in (docs/quant-formats.md §2).
//
// Sources, in order (as vLLM's get_quant_config): config.json `quantization_config` (top level, else
// `text_config.quantization_config`), then hf_quant_config.json `quantization` (ModelOpt's legacy
// file), then a standalone quantization_config.json. No section anywhere => unquantized. quant_method / quant_algo names are upper-cased for
// comparison ("modelopt" "nvfp4" == "NVFP4"). Understood producers:
//
//   modelopt    NVIDIA ModelOpt. Uniform `quant_algo` FP8 / NVFP4 / W4A16_NVFP4 with an
//               `exclude_modules` (legacy) or `ignore` (config.json) list of fnmatch wildcards; or
//               MIXED_PRECISION with a per-module `quantized_layers` map (anything not listed is BF16).
//               Routed experts are keyed by the aggregate "...mlp.experts" (transformers' fused experts)
//               while the tensors are per expert; both spellings resolve. KV cache: kv_cache_quant_algo
//               "FP8" or kv_cache_scheme {type float, num_bits 8}.
//   fp8         Qwen/DeepSeek block FP8: fmt e4m3, activation_scheme dynamic, weight_block_size [128,128],
//               `modules_to_not_convert` (or `ignored_layers`): names matched as whole path components.
//   auto-round  Intel AutoRound with packing_format auto_round:auto_gptq: bits 4, group_size, sym,
//               `block_name_to_quantize` (only modules under these prefixes are quantized) and
//               `extra_config` per-module overrides ({"bits": 16} = left in bf16), as vLLM's
//               AutoRoundConfig.get_layer_config; keys with regex characters are matched as regexes.
//   gptq        GPTQ / GPTQModel: bits 4, group_size, sym, desc_act, checkpoint_format gptq|gptq_v2,
//               lm_head, modules_in_block_to_quantize, and `dynamic` rules ("-:regex" = not quantized,
//               "+:regex" or bare = overrides; re.match semantics, first matching rule wins) as vLLM's
//               gptq_utils.get_dynamic_override.
//
// Anything else (awq, compressed-tensors, bitsandbytes, an unknown ModelOpt algo, FP8 KV in a format
// other than e4m3, 8-bit GPTQ, ...) is refused with a CheckpointError naming the file, the field and
// the value, rather than loaded wrong.
//
// format_for() is asked about linear modules (and routed-expert containers) by their HF path without
// the ".weight" suffix. Modules that are never quantized whatever the config says (embed_tokens,
// conv1d, norms, and — as in vLLM's Qwen3-Next/Qwen3.5 blocks — the router `mlp.gate` and
// `shared_expert_gate`) answer kBF16. The loader still checks that the tensors on disk match.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/weight_format.h"

namespace fp4serve {

enum class QuantMethod : uint8_t { kNone, kModelOpt, kFp8, kAutoRound, kGptq };
enum class KvCacheQuant : uint8_t { kNone, kFP8 };

std::string_view quant_method_name(QuantMethod method);

class QuantConfig {
 public:
  QuantConfig();  // unquantized
  ~QuantConfig();
  QuantConfig(const QuantConfig&);
  QuantConfig& operator=(const QuantConfig&);
  QuantConfig(QuantConfig&&) noexcept;
  QuantConfig& operator=(QuantConfig&&) noexcept;

  // config_json: the text of config.json; hf_quant_config_json: the text of hf_quant_config.json if
  // the checkpoint has one. The file names are used in messages.
  static QuantConfig parse(std::string_view config_json,
                           std::optional<std::string_view> hf_quant_config_json = std::nullopt,
                           const std::string& config_file = "config.json",
                           const std::string& hf_quant_file = "hf_quant_config.json");
  // A standalone quantization_config.json (AutoRound and GPTQ write one next to config.json; vLLM
  // reads it when config.json has no section): the file's top level is the section itself.
  static QuantConfig parse_standalone(std::string_view quantization_config_json,
                                      const std::string& file = "quantization_config.json");
  // Reads <model_dir>/config.json; without a quantization_config section there, falls back to
  // <model_dir>/hf_quant_config.json, then to <model_dir>/quantization_config.json.
  static QuantConfig load(const std::filesystem::path& model_dir);

  QuantMethod method() const;
  bool is_quantized() const { return method() != QuantMethod::kNone; }
  // Upper-cased algorithm: "MIXED_PRECISION", "NVFP4", "W4A16_NVFP4", "FP8", "FP8_BLOCK",
  // "AUTO-ROUND", "GPTQ"; "" when unquantized.
  const std::string& algo() const;
  // Where it was read: "config.json: quantization_config", "hf_quant_config.json: quantization", "".
  const std::string& source() const;
  KvCacheQuant kv_cache() const;
  // The format of a quantized module that no rule overrides (uniform configs; bf16 for MIXED).
  WeightFormat default_format() const;

  // The format of the linear module at `module_path` (HF name, no ".weight").
  WeightFormat format_for(std::string_view module_path) const;

  // Several lines for `fp4serve inspect`: method, source, KV cache, default format, rule counts.
  std::string describe() const;

  struct Rules;  // parsed rule tables (quant_config.cpp)

 private:
  std::unique_ptr<Rules> rules_;
};

}  // namespace fp4serve
