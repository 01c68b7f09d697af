// Reading safetensors files: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data region, which the tensors must cover exactly, without gaps or overlaps.
//
// The validation rules follow the reference implementation, the `safetensors` Rust crate
// (safetensors/src/tensor.rs: SafeTensors::read_metadata and Metadata::validate): header at most
// 100,000,000 bytes, tensors sorted by data_offsets must each start where the previous one ended,
// byte size must equal shape product x dtype size, and the last tensor must end exactly at the end
// of the file ("incomplete metadata, file not fully covered"). Additionally we refuse duplicate keys,
// which the crate's serde map would silently collapse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensor/dtype.h"

namespace fp4serve {

// One tensor of a safetensors file. Offsets are absolute positions in the file.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t file_offset = 0;  // 8 + N + data_offsets[0]
  uint64_t byte_size = 0;    // data_offsets[1] - data_offsets[0]

  int64_t numel() const;
};

// The parsed and validated header of one file.
struct SafetensorsHeader {
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // MAX_HEADER_SIZE of the Rust crate

  uint64_t header_bytes = 0;  // N
  uint64_t data_begin = 0;    // 8 + N: where data_offsets count from
  std::vector<TensorInfo> tensors;              // ordered by file_offset
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
  // name -> position in `tensors`; looked up by string_view without building a std::string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> index;

  const TensorInfo* find(std::string_view name) const;
};

// Parses and validates the header of a whole safetensors file held in memory. `file_bytes` must be
// the complete file: the checks against the data region need its length. Throws CheckpointError
// naming `name_for_errors` and the fault. Used by SafetensorsFile and the header fuzzer.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           std::string_view name_for_errors);

// One safetensors file, mapped read-only into memory. Views stay valid as long as the object lives;
// it is movable, not copyable.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  // nullptr when the file has no such tensor.
  const TensorInfo* find(std::string_view name) const { return header_.find(name); }
  // Throws CheckpointError naming the file when the tensor is absent.
  const TensorInfo& info(std::string_view name) const;

  // Zero-copy view of a tensor's bytes. `t` must come from this file.
  std::span<const std::byte> bytes(const TensorInfo& t) const;
  std::span<const std::byte> bytes(std::string_view name) const { return bytes(info(name)); }

  // Typed zero-copy view. T must have the dtype's element size (e.g. uint16_t for BF16), and the
  // data must be aligned for T (files written by the Python library and by SafetensorsWriter are:
  // they order tensors by decreasing element size after an 8-byte-aligned header). Throws
  // CheckpointError otherwise.
  template <class T>
  std::span<const T> as(const TensorInfo& t) const {
    check_typed_access(t, sizeof(T), alignof(T));
    auto b = bytes(t);
    return {reinterpret_cast<const T*>(b.data()), b.size() / sizeof(T)};
  }
  template <class T>
  std::span<const T> as(std::string_view name) const {
    return as<T>(info(name));
  }

  // Drops the whole pages of `range` from this process (madvise DONTNEED) when the range lies in this
  // file's mapping, returning whether it did. The mapping is read-only and never written, so a later
  // read faults the same bytes back in from the page cache: for data that was copied elsewhere
  // (packed weights) and is no longer read, so that resident memory counts it once.
  bool release_pages(std::span<const std::byte> range) const;

 private:
  void check_typed_access(const TensorInfo& t, size_t elem_size, size_t elem_align) const;
  void unmap() noexcept;

  std::filesystem::path path_;
  const std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  SafetensorsHeader header_;
};

}  // namespace fp4serve
