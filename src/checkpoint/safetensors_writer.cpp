#include "checkpoint/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"

namespace fp4serve {
namespace {

constexpr const char* kWriterName = "safetensors writer";
constexpr size_t kChunkBytes = 8u << 20;

// Position of each dtype in the Rust crate's `enum Dtype`, which is declared in increasing
// alignment order; files are written in decreasing order of it so every tensor stays aligned.
int crate_dtype_rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kU8: return 4;
    case DType::kI8: return 5;
    case DType::kF8E5M2: return 6;
    case DType::kF8E4M3: return 7;
    case DType::kF8E8M0: return 8;
    case DType::kI16: return 11;
    case DType::kU16: return 12;
    case DType::kF16: return 13;
    case DType::kBF16: return 14;
    case DType::kI32: return 15;
    case DType::kU32: return 16;
    case DType::kF32: return 17;
    case DType::kF64: return 19;
    case DType::kI64: return 20;
    case DType::kU64: return 21;
  }
  return 0;
}

// Closes on scope exit; write_file removes the temporary file when anything fails.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, FillFn fill) {
  if (name == "__metadata__") {
    throw CheckpointError(kWriterName, "tensor name '__metadata__' is reserved for the metadata");
  }
  // A full 40-layer NVFP4 checkpoint has ~124k tensors: look names up, never scan.
  if (names_.count(name)) throw CheckpointError(kWriterName, "tensor '" + name + "' added twice");
  uint64_t bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) throw CheckpointError(kWriterName, "tensor '" + name + "' has a negative dimension");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      throw CheckpointError(kWriterName, "tensor '" + name + "': byte size overflows 64 bits");
    }
  }
  names_.insert(name);
  specs_.push_back({std::move(name), dtype, std::move(shape), bytes, std::move(fill)});
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape,
                            std::span<const std::byte> bytes) {
  auto data = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  const std::string n = name;
  add(std::move(name), dtype, std::move(shape), [data](uint64_t offset, std::span<std::byte> chunk) {
    std::memcpy(chunk.data(), data->data() + offset, chunk.size());
  });
  if (specs_.back().byte_size != data->size()) {
    const uint64_t expected = specs_.back().byte_size;
    names_.erase(specs_.back().name);
    specs_.pop_back();
    throw CheckpointError(kWriterName, "tensor '" + n + "': shape and dtype need " +
                                           std::to_string(expected) + " bytes, got " +
                                           std::to_string(data->size()));
  }
}

uint64_t SafetensorsWriter::total_bytes() const {
  uint64_t total = 0;
  for (const auto& s : specs_) total += s.byte_size;
  return total;
}

void SafetensorsWriter::write(const std::filesystem::path& file) const {
  std::vector<const Spec*> all;
  for (const auto& s : specs_) all.push_back(&s);
  write_file(file, std::move(all));
}

void SafetensorsWriter::write_file(const std::filesystem::path& file,
                                   std::vector<const Spec*> tensors) const {
  std::sort(tensors.begin(), tensors.end(), [](const Spec* a, const Spec* b) {
    const int ra = crate_dtype_rank(a->dtype), rb = crate_dtype_rank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });

  // ordered_json keeps insertion order: metadata first, then tensors by offset, as the crate does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Spec* s : tensors) {
    header[s->name] = {{"dtype", std::string(dtype_name(s->dtype))},
                       {"shape", s->shape},
                       {"data_offsets", {offset, offset + s->byte_size}}};
    offset += s->byte_size;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a name that is not valid UTF-8
    throw CheckpointError(file.string(), std::string("cannot encode header: ") + e.what());
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');

  const std::filesystem::path tmp = file.string() + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> out(std::fopen(tmp.c_str(), "wb"));
  if (!out) throw CheckpointError(tmp.string(), std::string("cannot create: ") + std::strerror(errno));
  auto fail = [&](const char* what) {
    const int err = errno;
    out.reset();
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw CheckpointError(tmp.string(), std::string(what) + ": " + std::strerror(err));
  };
  auto put = [&](const void* data, size_t n) {
    if (std::fwrite(data, 1, n, out.get()) != n) fail("write failed");
  };
  uint8_t prefix[8];
  uint64_t n = text.size();
  for (auto& b : prefix) {
    b = static_cast<uint8_t>(n & 0xff);
    n >>= 8;
  }
  put(prefix, sizeof prefix);
  put(text.data(), text.size());

  std::vector<std::byte> buffer(std::min<uint64_t>(kChunkBytes, std::max<uint64_t>(offset, 1)));
  for (const Spec* s : tensors) {
    for (uint64_t done = 0; done < s->byte_size;) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(buffer.size(), s->byte_size - done));
      try {
        s->fill(done, std::span<std::byte>(buffer.data(), len));
      } catch (...) {
        out.reset();
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw;
      }
      put(buffer.data(), len);
      done += len;
    }
  }
  if (std::fflush(out.get()) != 0) fail("write failed");
  if (std::fclose(out.release()) != 0) fail("close failed");
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw CheckpointError(file.string(), "cannot rename " + tmp.string() + ": " + ec.message());
}

std::vector<std::filesystem::path> SafetensorsWriter::write_sharded(const std::filesystem::path& dir,
                                                                    uint64_t max_shard_bytes) const {
  // huggingface_hub split_state_dict_into_shards_factory: in registration order, a tensor larger
  // than the limit gets a shard of its own; otherwise a new shard starts when the next tensor
  // would push the current one past the limit.
  std::vector<std::vector<const Spec*>> shards;
  std::vector<const Spec*> current;
  uint64_t current_bytes = 0;
  for (const auto& s : specs_) {
    if (s.byte_size > max_shard_bytes) {
      shards.push_back({&s});
      continue;
    }
    if (current_bytes + s.byte_size > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(&s);
    current_bytes += s.byte_size;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));

  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> written;
  if (shards.size() == 1) {
    write_file(dir / "model.safetensors", shards[0]);
    written.push_back(dir / "model.safetensors");
    return written;
  }

  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    for (const Spec* s : shards[i]) weight_map[s->name] = name;
    write_file(dir / name, shards[i]);
    written.push_back(dir / name);
  }
  // transformers: json.dumps(index, indent=2, sort_keys=True) + "\n"
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes()}}}, {"weight_map", weight_map}};
  const auto index_path = dir / "model.safetensors.index.json";
  std::unique_ptr<std::FILE, FileCloser> out(std::fopen(index_path.c_str(), "wb"));
  if (!out) throw CheckpointError(index_path.string(), std::string("cannot create: ") + std::strerror(errno));
  const std::string text = index.dump(2) + "\n";
  if (std::fwrite(text.data(), 1, text.size(), out.get()) != text.size() ||
      std::fclose(out.release()) != 0) {
    throw CheckpointError(index_path.string(), std::string("write failed: ") + std::strerror(errno));
  }
  written.push_back(index_path);
  return written;
}

}  // namespace fp4serve
