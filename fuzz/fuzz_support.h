// What the fuzz targets share: where the real tokenizer and chat template are, how a target that
// cannot find them skips, and how a property violation is reported.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/utf8.h"

namespace fp4serve::fuzz {

// All strings (keys and values) of a JSON value are valid UTF-8: a rendering of such values must be
// valid UTF-8 too (the template targets' property).
inline bool all_valid_utf8(const nlohmann::ordered_json& j) {
  if (j.is_string()) return tokenizer::utf8::is_valid(j.get_ref<const std::string&>());
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!tokenizer::utf8::is_valid(it.key()) || !all_valid_utf8(it.value())) return false;
  }
  if (j.is_array()) {
    for (const auto& e : j)
      if (!all_valid_utf8(e)) return false;
  }
  return true;
}

// The exit status of a target that has nothing to fuzz here (scripts/fuzz.sh reports it as skipped).
inline constexpr int kSkipExitCode = 77;

// An environment override, else the path fixed at configure time (fuzz/CMakeLists.txt).
inline std::filesystem::path data_path(const char* env_var, const char* configured) {
  const char* v = std::getenv(env_var);
  return (v && *v) ? std::filesystem::path(v) : std::filesystem::path(configured);
}

// The real Qwen tokenizer (FP4SERVE_FUZZ_TOKENIZER_DIR, default .cache/tokenizers/qwen3.5 of the
// source tree), or exit with kSkipExitCode when it is not installed.
inline std::shared_ptr<const tokenizer::Tokenizer> load_tokenizer_or_skip(const char* target) {
  const auto dir = data_path("FP4SERVE_FUZZ_TOKENIZER_DIR", FP4SERVE_FUZZ_TOKENIZER_DIR);
  if (!std::filesystem::exists(dir / "tokenizer.json") && !std::filesystem::exists(dir / "tokenizer.json.gz")) {
    std::fprintf(stderr,
                 "%s: SKIPPED: no tokenizer.json in %s (scripts/setup.sh installs it; or set "
                 "FP4SERVE_FUZZ_TOKENIZER_DIR)\n",
                 target, dir.c_str());
    std::exit(kSkipExitCode);
  }
  return tokenizer::Tokenizer::load(dir);
}

// The Qwen3.6 chat template (FP4SERVE_FUZZ_CHAT_TEMPLATE, default tests/data/chat_templates/qwen3.6.jinja).
inline std::string load_chat_template_or_skip(const char* target) {
  const auto path = data_path("FP4SERVE_FUZZ_CHAT_TEMPLATE", FP4SERVE_FUZZ_CHAT_TEMPLATE);
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "%s: SKIPPED: no chat template at %s (set FP4SERVE_FUZZ_CHAT_TEMPLATE)\n", target,
                 path.c_str());
    std::exit(kSkipExitCode);
  }
  return tokenizer::read_maybe_gzipped(path);
}

// A broken property: print it (with the input when it is short enough to read) and abort, which
// libFuzzer reports as a crash and saves the input for.
[[noreturn]] inline void finding(const std::string& what, std::string_view input = {}) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  if (!input.empty() && input.size() <= 2000) {
    std::fprintf(stderr, "input (%zu bytes): %.*s\n", input.size(), static_cast<int>(input.size()), input.data());
  }
  std::abort();
}

}  // namespace fp4serve::fuzz
