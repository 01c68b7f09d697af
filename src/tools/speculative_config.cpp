#include "tools/speculative_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/scheduler_metrics.h"

namespace fp4serve::tools {
namespace {

constexpr std::string_view kFlag = "--speculative-config";

// Names vLLM accepts for a Qwen3.5/3.6 checkpoint's MTP layer.
constexpr std::array<std::string_view, 3> kMtpNames = {"mtp", "qwen3_5_mtp", "qwen3_next_mtp"};

[[noreturn]] void fail(const std::string& why) { throw std::runtime_error(fmt::format("{}: {}", kFlag, why)); }

}  // namespace

SpeculativeSettings parse_speculative_config(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    fail(fmt::format("'{}' is not a JSON object (example: '{{\"method\": \"mtp\", \"num_speculative_tokens\": 2}}')",
                     text.substr(0, 200)));
  }
  if (!j.is_object()) fail("expected a JSON object");
  SpeculativeSettings s;
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      if (!value.is_string()) fail("method must be a string");
      s.method = value.get<std::string>();
    } else if (key == "num_speculative_tokens") {
      if (!value.is_number_integer()) fail("num_speculative_tokens must be an integer");
      s.num_speculative_tokens = value.get<int>();
    } else if (key == "model") {
      // vLLM's MTP reads the target checkpoint; a separate draft model is another method.
      if (!value.is_null()) fail("model: a separate draft model is not supported (MTP uses the served checkpoint's "
                                 "own mtp.* layer; leave model out)");
    } else {
      fail(fmt::format("key '{}' is not supported (fp4serve takes method and num_speculative_tokens)", key));
    }
  }
  if (s.method.empty()) fail("method is required (\"mtp\")");
  if (std::find(kMtpNames.begin(), kMtpNames.end(), s.method) == kMtpNames.end()) {
    fail(fmt::format("method '{}' is not supported: fp4serve drafts with the checkpoint's own MTP layer only "
                     "(method \"mtp\"; vLLM's aliases \"qwen3_5_mtp\" and \"qwen3_next_mtp\" are accepted)",
                     s.method));
  }
  if (s.num_speculative_tokens < 1 || s.num_speculative_tokens > engine::kMaxSpeculativeTokens)
    fail(fmt::format("num_speculative_tokens must be 1 .. {} (got {})", engine::kMaxSpeculativeTokens,
                     s.num_speculative_tokens));
  s.enabled = true;
  s.decision = fmt::format("--speculative-config: method {}{}, {} draft token{} per step from the checkpoint's MTP "
                           "layer, verified by the target (output identical to a run without it)",
                           s.method, s.method == "mtp" ? "" : " (vLLM's alias of mtp)", s.num_speculative_tokens,
                           s.num_speculative_tokens == 1 ? "" : "s");
  return s;
}

}  // namespace fp4serve::tools
