// Writing safetensors files and sharded checkpoints without holding the data in memory: all tensor
// specs are registered first (the header needs every shape and offset), then the data is streamed
// tensor by tensor, in chunks, from a fill callback. Used by `fp4serve synth` (multi-GB random
// checkpoints) and by tests to make fixture files.
//
// The layout matches what the Python `safetensors` library writes (Rust crate, tensor.rs `prepare`):
// tensors ordered by decreasing dtype (its alignment order) then by name, compact JSON with
// "__metadata__" first, the header padded with spaces to a multiple of 8 bytes. With no metadata (or
// one key) the bytes are identical to safetensors.torch.save_file's. Sharding follows
// huggingface_hub's split_state_dict_into_shards_factory and transformers' index file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "tensor/dtype.h"

namespace fp4serve {

class SafetensorsWriter {
 public:
  // Fills `chunk` with the tensor's bytes [offset, offset + chunk.size()). Called with consecutive
  // chunks, in order, exactly covering the tensor; never called for an empty tensor.
  using FillFn = std::function<void(uint64_t offset, std::span<std::byte> chunk)>;

  static constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;  // huggingface_hub's "5GB"

  // Registers a tensor whose data comes from `fill`. Throws CheckpointError for a repeated or
  // reserved name, a negative dimension or a byte size that overflows.
  void add(std::string name, DType dtype, std::vector<int64_t> shape, FillFn fill);
  // Registers a tensor from bytes (copied); their size must match shape x dtype size.
  void add(std::string name, DType dtype, std::vector<int64_t> shape, std::span<const std::byte> bytes);

  // "__metadata__" of every file written (transformers writes {"format": "pt"}).
  void set_metadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }

  size_t tensor_count() const { return specs_.size(); }
  uint64_t total_bytes() const;

  // Writes every registered tensor into one file (via a temporary name, renamed when complete).
  void write(const std::filesystem::path& file) const;

  // Writes into `dir` (created if needed) model.safetensors when everything fits in one shard of
  // `max_shard_bytes`, else model-00001-of-0000N.safetensors ... plus model.safetensors.index.json.
  // Returns the file names written, index last.
  std::vector<std::filesystem::path> write_sharded(const std::filesystem::path& dir,
                                                   uint64_t max_shard_bytes = kDefaultMaxShardBytes) const;

 private:
  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t byte_size;
    FillFn fill;
  };

  void write_file(const std::filesystem::path& file, std::vector<const Spec*> tensors) const;

  std::vector<Spec> specs_;  // registration order
  std::unordered_set<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace fp4serve
