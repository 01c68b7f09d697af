#pragma once
// Shared helpers for the tokenizer tests: where the real tokenizers are, loading them once, and
// reading the committed goldens.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace fp4serve::tokenizer::testing {

inline std::filesystem::path cache_dir(const std::string& name) {
  return std::filesystem::path(FP4SERVE_SOURCE_DIR) / ".cache" / "tokenizers" / name;
}
inline std::filesystem::path data_dir() { return std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "tokenizer"; }
inline std::filesystem::path shared_dir() { return std::filesystem::path(FP4SERVE_SHARED_DIR); }

// The installed tokenizer (qwen3.5 or qwen3), loaded once per process. Missing files are a test
// FAILURE, not a skip: scripts/setup.sh installs them (tools/reference/fetch_tokenizers.sh).
inline const Tokenizer* installed(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second.get();
  const auto dir = cache_dir(name);
  if (!std::filesystem::exists(dir / "tokenizer.json") && !std::filesystem::exists(dir / "tokenizer.json.gz")) {
    ADD_FAILURE() << "The " << name << " tokenizer is not installed in " << dir
                  << ". Run tools/reference/fetch_tokenizers.sh (scripts/setup.sh does).";
    return nullptr;
  }
  auto tok = Tokenizer::load(dir);
  return loaded.emplace(name, std::move(tok)).first->second.get();
}

// JSON lines of a (gzipped) file.
inline std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path) {
  const std::string text = read_maybe_gzipped(path);
  std::vector<nlohmann::json> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) out.push_back(nlohmann::json::parse(text.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

inline std::vector<std::int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<std::int32_t>>(); }

}  // namespace fp4serve::tokenizer::testing
