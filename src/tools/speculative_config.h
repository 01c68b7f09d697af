// vLLM's --speculative-config (a JSON object; vllm/config/speculative.py SpeculativeConfig) for the
// one method fp4serve has: the checkpoint's own MTP layer. vLLM accepts "mtp" and, as deprecated
// aliases it rewrites to "mtp", the per-family names; the ones that name a Qwen3.5/3.6 MTP layer
// ("qwen3_5_mtp", "qwen3_next_mtp") are accepted here too. Every other method (ngram, eagle,
// draft_model, other families' MTP, ...) and every other key is refused by name, never ignored.
#pragma once

#include <string>

namespace fp4serve::tools {

struct SpeculativeSettings {
  bool enabled = false;
  int num_speculative_tokens = 0;
  std::string method;       // as given
  std::string decision;     // the log line saying what was chosen
};

// Throws std::runtime_error naming the flag, the key and the value at fault.
SpeculativeSettings parse_speculative_config(const std::string& json_text);

}  // namespace fp4serve::tools
