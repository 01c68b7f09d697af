#pragma once
// Finding and reading a tokenizer's files: tokenizer.json (plain or .gz) and, beside it,
// tokenizer_config.json (whose added_tokens_decoder transformers merges in).
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace fp4serve::tokenizer {

struct TokenizerFiles {
  std::filesystem::path tokenizer_json_path;
  nlohmann::json tokenizer_json;
  std::optional<nlohmann::json> tokenizer_config;  // absent when there is no tokenizer_config.json
};

// `path` is a directory (holding tokenizer.json or tokenizer.json.gz) or the tokenizer.json file
// itself. Throws TokenizerError naming the file on any problem.
TokenizerFiles read_tokenizer_files(const std::filesystem::path& path);

// Whole file, transparently gunzipped when it is gzip-compressed.
std::string read_maybe_gzipped(const std::filesystem::path& path);

}  // namespace fp4serve::tokenizer
