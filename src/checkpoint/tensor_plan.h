// The tensors a checkpoint must hold, derived from its ModelConfig and the format of each module:
// names, dtypes and shapes of every tensor of the text model, grouped by module. One source of
// truth for three readers:
//   - the weight loader checks a checkpoint against it (missing, unexpected, wrongly typed or shaped
//     tensors are reported by name);
//   - `fp4serve synth` writes exactly it;
//   - `fp4serve inspect` sums its bytes (weights, active bytes per token).
// Names and shapes: docs/model-arch.md §4 (BF16 release) and §4.3 (Qwen3-Next), docs/quant-formats.md
// §3 (NVFP4 / FP8 tensors), and the auto_gptq packing (tensor/int4_gptq.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/model_config.h"
#include "tensor/dtype.h"
#include "tensor/weight_format.h"

namespace fp4serve {

// How routed experts are stored: the BF16 release fuses them into two 3-D tensors per layer
// (experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I], no ".weight"); quantized releases
// and Qwen3-Next store 2-D tensors per expert (experts.{e}.{gate,up,down}_proj.weight).
enum class ExpertStorage : uint8_t { kFused, kPerExpert };

enum class ModuleKind : uint8_t {
  kEmbedding,      // embed_tokens: a row per token is read
  kLinear,         // any linear (format from the quant config)
  kRoutedExperts,  // one layer's routed experts (fused tensors, or all per-expert linears)
  kDense,          // norms, conv1d, A_log, dt_bias: always unquantized
};

struct PlannedTensor {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  bool optional = false;  // e.g. input_scale of a W4A16 layer, FP8 KV scales
  // Other dtypes the loader accepts in this slot (e.g. A_log is F32 in the release, BF16 in a
  // checkpoint saved from a bf16 model).
  std::vector<DType> also_accepted;

  uint64_t byte_size() const;
};

struct PlannedModule {
  std::string path;  // "model.language_model.layers.0.linear_attn.in_proj_qkv", "lm_head"
  ModuleKind kind = ModuleKind::kDense;
  WeightFormat format;
  int64_t layer = -1;  // -1 for embed_tokens, final norm, lm_head
  int64_t out_features = 0;  // linears: N
  int64_t in_features = 0;   // linears: K
  int64_t num_experts = 0;   // kRoutedExperts only
  // Fraction of this module's bytes read to decode one token at batch 1: 1 for most, top_k / E
  // for routed experts, 1 / vocab for the embedding (one row; 1 when the lm_head is tied to it).
  double active_fraction = 1.0;
  std::vector<PlannedTensor> tensors;

  uint64_t byte_size() const;
};

// Resolves the weight format of a linear module from its HF module path (without ".weight").
// For routed experts the path of one expert's projection is asked
// ("...mlp.experts.7.gate_proj"); the answer must be the same for all of a layer's experts.
using FormatResolver = std::function<WeightFormat(std::string_view module_path)>;

struct TensorPlan {
  std::vector<PlannedModule> modules;

  uint64_t total_bytes() const;
  uint64_t active_bytes_per_token() const;
  // Every planned tensor, by name (for lookups when validating).
  std::vector<const PlannedTensor*> all_tensors() const;
};

// kv_cache_scales: add optional FP8 KV-cache scales (self_attn.k_proj.k_scale, v_proj.v_scale)
// as ModelOpt writes them when it calibrates the KV cache.
TensorPlan make_tensor_plan(const ModelConfig& config, const FormatResolver& format_of,
                            ExpertStorage experts, bool kv_cache_scales = false);

// The MTP (multi-token prediction) block stored under "mtp." (docs/model-arch.md §2.5): mtp.fc
// [H, 2H], the three norms, and one full-attention decoder layer with its sparse MoE block
// (mtp.layers.0.*). Planned apart from the text model because a checkpoint may lack it and still
// serve: the loader checks it only when it is there, and only speculative decoding needs it.
// `experts` is the MTP block's own storage (the NVFP4 release stores its MTP experts fused in
// BF16 while its trunk is per-expert NVFP4); format_of is asked for every "mtp." module path.
TensorPlan make_mtp_plan(const ModelConfig& config, const FormatResolver& format_of, ExpertStorage experts,
                         bool kv_cache_scales = false);
inline constexpr std::string_view kMtpPrefix = "mtp.";

// The tensors of one linear of shape [out, in] in `format`, named "<path>.weight" etc.
std::vector<PlannedTensor> linear_tensors(const std::string& path, const WeightFormat& format,
                                          int64_t out, int64_t in);

// Prefixes of tensors that real releases carry but the text model does not use: the MTP head
// ("mtp.") and the vision tower ("model.visual."). The loader counts them instead of refusing them.
bool is_known_unused_tensor(std::string_view name);

// Bytes of attention KV cache per token (all full-attention layers, K and V) for a KV element size.
uint64_t kv_cache_bytes_per_token(const ModelConfig& config, uint64_t element_bytes);
// Bytes of Gated DeltaNet state per sequence: fp32 recurrent state [Hv, dk, dv] plus the conv
// state of the last (kernel - 1) raw inputs in bf16, over all linear-attention layers.
uint64_t gdn_state_bytes_per_sequence(const ModelConfig& config);

}  // namespace fp4serve
