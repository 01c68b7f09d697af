// The safetensors weights of one model directory, whatever their split, behind one lookup by name.
// Which files make up the model follows transformers' from_pretrained: model.safetensors if present,
// else model.safetensors.index.json and every shard its weight_map names, else (our addition, for
// hand-assembled directories) the union of all *.safetensors files, refusing a name found twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "checkpoint/safetensors.h"

namespace fp4serve {

class ShardedCheckpoint {
 public:
  enum class Layout { kSingleFile, kIndexed, kUnindexedShards };

  // Opens and validates every file. Throws CheckpointError naming the directory, the index file or
  // the shard at fault.
  static ShardedCheckpoint open(const std::filesystem::path& model_dir);

  const std::filesystem::path& directory() const { return dir_; }
  Layout layout() const { return layout_; }
  // The index file when layout() == kIndexed, else empty.
  const std::filesystem::path& index_path() const { return index_path_; }
  // The index's "metadata" object as JSON text ("{}" when there is none); total_size if it has one.
  const std::string& index_metadata_json() const { return index_metadata_json_; }
  std::optional<uint64_t> index_total_size() const { return index_total_size_; }

  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;
  size_t tensor_count() const { return by_name_.size(); }
  bool contains(std::string_view name) const { return find(name).info != nullptr; }

  struct Entry {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* info = nullptr;
  };
  // {nullptr, nullptr} when absent.
  Entry find(std::string_view name) const;
  // Throws CheckpointError naming the directory when absent.
  Entry at(std::string_view name) const;
  std::span<const std::byte> bytes(std::string_view name) const;
  // SafetensorsFile::release_pages on the file whose mapping holds `range` (false: none does).
  bool release_pages(std::span<const std::byte> range) const;

  // Tensors present in a shard but not named by the index's weight_map. They are not visible
  // through find(); the loader may warn about them.
  const std::vector<std::string>& unindexed_tensors() const { return unindexed_; }

 private:
  void add_file(const std::filesystem::path& file);
  void open_single(const std::filesystem::path& file);
  void open_indexed(const std::filesystem::path& index);
  void open_unindexed(const std::vector<std::filesystem::path>& files);

  std::filesystem::path dir_;
  Layout layout_ = Layout::kSingleFile;
  std::filesystem::path index_path_;
  std::string index_metadata_json_ = "{}";
  std::optional<uint64_t> index_total_size_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Entry, NameHash, std::equal_to<>> by_name_;
  std::vector<std::string> unindexed_;
};

}  // namespace fp4serve
