// Typed reading of checkpoint JSON files with faults that say where they are. A JsonField is one
// node plus the file it came from and its path inside it, so that every error reads like
// "config.json: text_config.hidden_size: expected an integer, got string". Used by model_config,
// generation_config and quant_config; not meant for the hot path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve {

// ordered_json keeps members in file order: GPTQ `dynamic` rules are tried first-match-first, as
// Python dicts iterate in insertion order.
using CheckpointJson = nlohmann::ordered_json;

class JsonField {
 public:
  JsonField(const CheckpointJson& node, std::string file, std::string path)
      : node_(&node), file_(std::move(file)), path_(std::move(path)) {}

  const CheckpointJson& json() const { return *node_; }
  const std::string& file() const { return file_; }
  // Dotted path from the document root ("text_config.rope_parameters.rope_theta"); "" = the root.
  const std::string& path() const { return path_; }

  bool is_object() const { return node_->is_object(); }
  bool is_array() const { return node_->is_array(); }
  bool is_null() const { return node_->is_null(); }

  // A member of an object. find() is nullopt when the key is absent or null (HF writes
  // `"pad_token_id": null` for "not set"); at() throws "missing" instead.
  std::optional<JsonField> find(std::string_view key) const;
  JsonField at(std::string_view key) const;
  bool has(std::string_view key) const { return find(key).has_value(); }

  // Conversions; each throws CheckpointError naming file and path on a type mismatch.
  int64_t as_int() const;            // JSON integers, or floats with an integral value
  double as_double() const;          // any JSON number
  bool as_bool() const;              // JSON true/false only
  std::string as_string() const;
  std::vector<JsonField> as_array() const;
  std::vector<int64_t> as_int_list() const;
  std::vector<std::string> as_string_list() const;
  // Object members in file order.
  std::vector<std::pair<std::string, JsonField>> members() const;

  // Optional members with a default.
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_double(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, std::string fallback) const;

  [[noreturn]] void fail(std::string_view fault) const;

 private:
  std::string child_path(std::string_view key) const;
  std::string type_name() const;

  const CheckpointJson* node_;
  std::string file_;
  std::string path_;
};

// Parses JSON text; a syntax error becomes CheckpointError(file, "invalid JSON: <detail>").
CheckpointJson parse_json_text(std::string_view text, const std::string& file);

// Reads a whole file; a missing or unreadable file becomes CheckpointError(path, ...).
std::string read_text_file(const std::filesystem::path& path);

}  // namespace fp4serve
