// The packed panels of a model (packed_weight.h) in one file, written at the first start and mapped
// read-only on later ones, so a restart does no packing and the weights sit in memory once (the
// file's page cache, shared by every process that maps it).
//
// File (little-endian, native struct layout; a file from another build is refused by its key):
//   [0, 4096)       header: magic "FP4SPWC\\0", format version, entry count, index offset and size,
//                   key length, then the key: what the panels were made from and for (checkpoint
//                   identity, kernel tier, kFormatVersion) -- a file whose key differs is stale
//   data            each entry's panel bytes at a 4096-byte aligned offset (AMX and aligned vector
//                   loads need 64)
//   index           per entry: layout, n, k, kp, panels, panel_bytes, tensor_scale, data offset, then
//                   its block_scales (fp32) and normal_scales (bytes)
// Entries are in the order the backend prepared the weights (the model binds them in one fixed
// order), and each is checked against the weight it stands for (layout and shape) before use.
// Written to "<file>.tmp.<pid>", header last, fsync'd, then renamed: a reader never sees a torn file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/packed_weight.h"

namespace fp4serve::kernels::cpu {

// Bumped whenever the panel layout (packed_weight.h) or this file's layout changes.
constexpr uint32_t kPackedWeightCacheVersion = 1;

class PackedWeightCacheReader {
 public:
  // nullptr when the file is missing, unreadable, torn or made for another key; *why says which.
  static std::unique_ptr<PackedWeightCacheReader> open(const std::filesystem::path& file, const std::string& key,
                                                       std::string* why);
  ~PackedWeightCacheReader();
  PackedWeightCacheReader(const PackedWeightCacheReader&) = delete;
  PackedWeightCacheReader& operator=(const PackedWeightCacheReader&) = delete;

  size_t size() const { return entries_.size(); }
  // Entry i as the packed form of w, its bytes in the mapping (not owned: valid while this reader
  // lives). False when there is no entry i or it was made from another layout or shape.
  bool take(size_t i, const WeightView& w, PackedWeight& out) const;
  uint64_t mapped_bytes() const { return size_; }

 private:
  struct Entry {
    WeightLayout format;
    int64_t n, k, kp, panels, panel_bytes;
    float tensor_scale;
    uint64_t offset;
    std::vector<float> block_scales;
    std::vector<uint8_t> normal_scales;
  };
  PackedWeightCacheReader() = default;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Entry> entries_;
};

class PackedWeightCacheWriter {
 public:
  // Opens "<file>.tmp.<pid>". Throws std::runtime_error when it cannot be created.
  PackedWeightCacheWriter(std::filesystem::path file, std::string key);
  ~PackedWeightCacheWriter();  // removes the temp file unless committed
  PackedWeightCacheWriter(const PackedWeightCacheWriter&) = delete;
  PackedWeightCacheWriter& operator=(const PackedWeightCacheWriter&) = delete;

  // Appends p's panels. A write error (disk full) makes the writer fail quietly: commit() then
  // returns false and the temp file is removed.
  void add(const PackedWeight& p);
  // Index, header, fsync, rename into place. Returns false (with *why) when nothing was committed.
  bool commit(std::string* why);
  uint64_t bytes_written() const { return end_; }

 private:
  struct Meta;
  std::filesystem::path file_, tmp_;
  std::string key_;
  int fd_ = -1;
  uint64_t end_ = 0;
  std::string error_;
  std::vector<std::vector<uint8_t>> index_;
  bool committed_ = false;
};

}  // namespace fp4serve::kernels::cpu
