// generation_config.json: the checkpoint's default sampling parameters and stop tokens. Every field
// is optional; absent means "not set by the checkpoint" (the engine then uses its own defaults or
// the request's). For Qwen3.6: eos [248046, 248044], bos/pad 248044, do_sample, T=1.0, top_k 20,
// top_p 0.95 (docs/model-arch.md §1.1).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve {

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // eos_token_id: an int or a list; empty when absent
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<int64_t> max_new_tokens;

  static GenerationConfig parse(std::string_view json_text, const std::string& file = "generation_config.json");
  // Reads <model_dir>/generation_config.json; a checkpoint without one gets an empty config.
  static GenerationConfig load(const std::filesystem::path& model_dir);

  std::string describe() const;
};

}  // namespace fp4serve
