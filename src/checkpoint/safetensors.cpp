#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/strict_json.h"

namespace fp4serve {
namespace {

using nlohmann::json;

constexpr uint64_t kLengthPrefixBytes = 8;

// Names come from untrusted files; keep messages readable even for a megabyte-long key.
std::string quote_name(std::string_view name) {
  constexpr size_t kMax = 200;
  if (name.size() <= kMax) return "'" + std::string(name) + "'";
  return "'" + std::string(name.substr(0, kMax)) + "...' (" + std::to_string(name.size()) + " bytes)";
}

std::string known_dtype_names() {
  std::string out;
  for (int i = 0; i <= static_cast<int>(DType::kF8E8M0); ++i) {
    if (!out.empty()) out += ", ";
    out += dtype_name(static_cast<DType>(i));
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Validates one tensor entry of the header and returns it with data_offsets relative to the data
// region (file_offset is fixed up by the caller).
class EntryParser {
 public:
  EntryParser(const std::string& path, const std::string& name) : path_(path), name_(name) {}

  TensorInfo parse(const json& entry, uint64_t data_region_bytes) const {
    if (!entry.is_object()) fail("entry must be a JSON object, got " + json_type_name(entry));
    TensorInfo t;
    t.name = name_;
    t.dtype = parse_dtype(field(entry, "dtype"));
    t.shape = parse_shape(field(entry, "shape"));
    auto [begin, end] = parse_offsets(field(entry, "data_offsets"));
    if (begin > end) {
      fail("data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
    }
    if (end > data_region_bytes) {
      fail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "] run past the end of the file (data region is " + std::to_string(data_region_bytes) +
           " bytes)");
    }
    const uint64_t expected = byte_size(t);
    if (expected != end - begin) {
      fail("shape " + shape_string(t.shape) + " x " + std::string(dtype_name(t.dtype)) + " (" +
           std::to_string(dtype_size(t.dtype)) + " bytes) = " + std::to_string(expected) +
           " bytes, but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "] span " + std::to_string(end - begin) + " bytes (size mismatch)");
    }
    t.file_offset = begin;
    t.byte_size = end - begin;
    return t;
  }

 private:
  [[noreturn]] void fail(const std::string& fault) const {
    throw CheckpointError(path_, "tensor " + quote_name(name_) + ": " + fault);
  }

  const json& field(const json& entry, const char* key) const {
    auto it = entry.find(key);
    if (it == entry.end()) fail(std::string("missing field '") + key + "'");
    return *it;
  }

  DType parse_dtype(const json& v) const {
    if (!v.is_string()) fail("field 'dtype' must be a string, got " + json_type_name(v));
    const auto& s = v.get_ref<const std::string&>();
    auto d = dtype_from_safetensors(s);
    if (!d) fail("unknown dtype " + quote_name(s) + " (known: " + known_dtype_names() + ")");
    return *d;
  }

  std::vector<int64_t> parse_shape(const json& v) const {
    if (!v.is_array()) fail("field 'shape' must be an array, got " + json_type_name(v));
    std::vector<int64_t> shape;
    shape.reserve(v.size());
    for (const auto& d : v) {
      if (d.is_number_integer() && !d.is_number_unsigned()) {
        fail("shape has negative dimension " + std::to_string(d.get<int64_t>()));
      }
      if (!d.is_number_unsigned()) {
        fail("shape dimensions must be non-negative integers, got " + json_type_name(d) + " " +
             d.dump());
      }
      const uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        fail("shape dimension " + std::to_string(u) + " is absurdly large");
      }
      shape.push_back(static_cast<int64_t>(u));
    }
    return shape;
  }

  std::pair<uint64_t, uint64_t> parse_offsets(const json& v) const {
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned()) {
      fail("field 'data_offsets' must be an array of two non-negative integers, got " +
           (v.is_array() ? v.dump().substr(0, 200) : json_type_name(v)));
    }
    return {v[0].get<uint64_t>(), v[1].get<uint64_t>()};
  }

  // Element count x dtype size, refusing shapes whose product overflows 64 bits exactly as the
  // crate does (ValidationOverflow): the element count is folded left to right with overflow checks,
  // so [0, 2^62, 2^62] is an empty tensor but [2^62, 2^62, 0] is refused.
  uint64_t byte_size(const TensorInfo& t) const {
    uint64_t n = 1;
    bool overflow = false;
    for (int64_t d : t.shape) overflow = overflow || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
    overflow = overflow || __builtin_mul_overflow(n, static_cast<uint64_t>(dtype_size(t.dtype)), &n);
    if (overflow) {
      fail("shape " + shape_string(t.shape) + " is absurdly large: its byte size overflows 64 bits");
    }
    return n;
  }

  const std::string& path_;
  const std::string& name_;
};

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& path) {
  if (!v.is_object()) {
    throw CheckpointError(path, "'__metadata__' must be an object of strings, got " + json_type_name(v));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      throw CheckpointError(path, "'__metadata__' value for key " + quote_name(key) +
                                      " must be a string, got " + json_type_name(value));
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// Sorted by offset, every tensor must start where the previous one ended and the last must end at
// the end of the file (Metadata::validate and the MetadataIncompleteBuffer check of the crate).
void check_coverage(const std::vector<TensorInfo>& tensors, uint64_t data_region_bytes,
                    const std::string& path) {
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const auto& t : tensors) {
    const uint64_t begin = t.file_offset;
    if (begin < covered) {
      throw CheckpointError(
          path, "tensors " + quote_name(previous->name) + " [" +
                    std::to_string(previous->file_offset) + ", " + std::to_string(covered) +
                    ") and " + quote_name(t.name) + " [" + std::to_string(begin) + ", " +
                    std::to_string(begin + t.byte_size) + ") overlap in the data region");
    }
    if (begin > covered) {
      throw CheckpointError(path, "gap in the data region: bytes [" + std::to_string(covered) + ", " +
                                      std::to_string(begin) + ") before tensor " + quote_name(t.name) +
                                      " belong to no tensor (incomplete metadata, file not fully covered)");
    }
    covered = begin + t.byte_size;
    previous = &t;
  }
  if (covered != data_region_bytes) {
    throw CheckpointError(path, "gap in the data region: its last " +
                                    std::to_string(data_region_bytes - covered) +
                                    " bytes belong to no tensor (incomplete metadata, file not fully covered)");
  }
}

}  // namespace

int64_t TensorInfo::numel() const {
  // Unsigned: a validated shape's product fits (it is at most the file size), but a prefix of it
  // may not fit int64 when a later dimension is 0.
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return static_cast<int64_t>(n);
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           std::string_view name_for_errors) {
  const std::string path(name_for_errors);
  const uint64_t file_size = file_bytes.size();
  if (file_size < kLengthPrefixBytes) {
    throw CheckpointError(path, "truncated: the file is " + std::to_string(file_size) +
                                    " bytes, too short for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file_bytes[i]);
  if (n > SafetensorsHeader::kMaxHeaderBytes) {
    throw CheckpointError(path, "header length " + std::to_string(n) + " is too large (limit " +
                                    std::to_string(SafetensorsHeader::kMaxHeaderBytes) + " bytes)");
  }
  if (n > file_size - kLengthPrefixBytes) {
    throw CheckpointError(path, "truncated: header length " + std::to_string(n) +
                                    " runs past the end of the file (" + std::to_string(file_size) +
                                    " bytes)");
  }

  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_begin = kLengthPrefixBytes + n;
  const uint64_t data_region_bytes = file_size - h.data_begin;

  std::string_view text(reinterpret_cast<const char*>(file_bytes.data()) + kLengthPrefixBytes, n);
  json root = parse_json_strict(text, path, "header");
  if (!root.is_object()) {
    throw CheckpointError(path, "header is not a JSON object, got " + json_type_name(root));
  }

  h.tensors.reserve(root.size());
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(value, path);
      continue;
    }
    h.tensors.push_back(EntryParser(path, key).parse(value, data_region_bytes));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.file_offset, a.byte_size) < std::pair(b.file_offset, b.byte_size);
  });
  check_coverage(h.tensors, data_region_bytes, path);

  h.index.reserve(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    h.tensors[i].file_offset += h.data_begin;
    h.index.emplace(h.tensors[i].name, i);  // names are unique: parse_json_strict refused repeats
  }
  return h;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string p = path.string();
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(p, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw CheckpointError(p, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CheckpointError(p, "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw CheckpointError(p, std::string("cannot mmap: ") + std::strerror(err));
    }
    base_ = static_cast<const std::byte*>(m);
  }
  ::close(fd);  // the mapping keeps the file alive
  try {
    header_ = parse_safetensors_header({base_, size_}, p);
  } catch (...) {
    unmap();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      header_(std::move(other.header_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    header_ = std::move(other.header_);
  }
  return *this;
}

bool SafetensorsFile::release_pages(std::span<const std::byte> range) const {
  if (base_ == nullptr || range.empty() || range.data() < base_ || range.data() + range.size() > base_ + size_)
    return false;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(range.data()) + page - 1) / page * page;  // whole pages only:
  const auto end = (reinterpret_cast<uintptr_t>(range.data()) + range.size()) / page * page;  // neighbours stay
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  return true;
}

void SafetensorsFile::unmap() noexcept {
  if (base_ != nullptr) ::munmap(const_cast<std::byte*>(base_), size_);
  base_ = nullptr;
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw CheckpointError(path_.string(), "no tensor named " + quote_name(name));
  return *t;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  return {base_ + t.file_offset, t.byte_size};
}

void SafetensorsFile::check_typed_access(const TensorInfo& t, size_t elem_size, size_t elem_align) const {
  if (elem_size != dtype_size(t.dtype)) {
    throw CheckpointError(path_.string(), "tensor " + quote_name(t.name) + " is " +
                                              std::string(dtype_name(t.dtype)) + " (" +
                                              std::to_string(dtype_size(t.dtype)) +
                                              "-byte elements), asked for a " +
                                              std::to_string(elem_size) + "-byte element type");
  }
  if (reinterpret_cast<uintptr_t>(base_ + t.file_offset) % elem_align != 0) {
    throw CheckpointError(path_.string(), "tensor " + quote_name(t.name) + " at file offset " +
                                              std::to_string(t.file_offset) + " is not aligned to " +
                                              std::to_string(elem_align) +
                                              " bytes; read it with bytes() instead");
  }
}

}  // namespace fp4serve
