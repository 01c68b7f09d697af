// Matching module paths ("model.language_model.layers.3.self_attn.q_proj") against the name lists
// that quantization configs carry. Each producer means something different by an entry, so each
// rule is named after the tool whose semantics it reproduces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp4serve {

// Python fnmatch.fnmatchcase: `*` any run (dots included), `?` one character, `[seq]` / `[!seq]`
// with ranges; the whole path must match. ModelOpt's exclude_modules / ignore lists are wildcards
// of this kind ("model.visual*", "*mlp.gate") and vLLM matches them with fnmatch.
bool fnmatch_case(std::string_view text, std::string_view pattern);

// `name` occurs in `path` as a run of whole dot-separated components: "mlp.gate" matches
// "model.layers.0.mlp.gate" but not "model.layers.0.mlp.gate_up_proj". This is how
// modules_to_not_convert / modules_in_block_to_quantize entries (full paths or tails) are meant;
// vLLM's plain substring test would also hit gate_up_proj, which sglang fixed the same way.
bool contains_components(std::string_view path, std::string_view name);

// `path` is `ancestor` or inside it ("a.b" is inside "a", "ab" is not).
bool is_within(std::string_view path, std::string_view ancestor);

// The spellings one HF module may have in configs written by different tools: the path itself and,
// for the Qwen3.5 multimodal wrapper, "model.language_model.X" <-> "language_model.model.X" (vLLM's
// _quantized_layer_prefix_candidates).
std::vector<std::string> module_path_spellings(std::string_view path);

}  // namespace fp4serve
