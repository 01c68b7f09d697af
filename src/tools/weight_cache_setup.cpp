#include "tools/weight_cache_setup.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace fp4serve::tools {
namespace {

namespace fs = std::filesystem;

uint64_t fnv1a(const void* data, size_t size, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// FNV-1a of the first `limit` bytes of a file (the whole file for small ones); 0 when unreadable.
uint64_t hash_file_prefix(const fs::path& p, uint64_t limit) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return 0;
  std::vector<char> buf(1 << 16);
  uint64_t h = 1469598103934665603ull;
  while (limit > 0 && in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(limit, buf.size())));
    const auto n = static_cast<uint64_t>(in.gcount());
    if (n == 0) break;
    h = fnv1a(buf.data(), n, h);
    limit -= n;
  }
  return h;
}

// The safetensors header: 8-byte little-endian length, then that much JSON.
uint64_t safetensors_header_hash(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  uint64_t len = 0;
  if (!in.read(reinterpret_cast<char*>(&len), 8)) return 0;
  return hash_file_prefix(p, 8 + std::min<uint64_t>(len, uint64_t{1} << 30));
}

}  // namespace

std::string checkpoint_identity(const LoadedCheckpoint& ck) {
  std::vector<std::string> parts;
  for (const auto& f : ck.files().files()) {
    std::error_code ec;
    const auto mtime = fs::last_write_time(f->path(), ec);
    const auto ns = ec ? 0 : std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
    parts.push_back(fmt::format("{} size={} mtime_ns={} header_fnv={:016x}", f->path().filename().string(),
                                f->file_size(), ns, safetensors_header_hash(f->path())));
  }
  std::sort(parts.begin(), parts.end());
  for (const char* name : {"config.json", "hf_quant_config.json", "quantization_config.json", "quantize_config.json",
                           "model.safetensors.index.json"}) {
    const fs::path p = ck.directory() / name;
    std::error_code ec;
    if (fs::exists(p, ec)) parts.push_back(fmt::format("{} fnv={:016x}", name, hash_file_prefix(p, uint64_t{1} << 26)));
  }
  std::string out;
  for (const auto& p : parts) out += p + "\n";
  return out;
}

fs::path weight_cache_file(const fs::path& model_dir, std::string_view tier) {
  const std::string name = fmt::format(".fp4serve-weights-{}.bin", tier);
  if (::access(model_dir.c_str(), W_OK) == 0) return model_dir / name;
  fs::path base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = x;
  else if (const char* h = std::getenv("HOME"); h && *h) base = fs::path(h) / ".cache";
  else base = fs::temp_directory_path();
  std::error_code ec;
  const std::string abs = fs::absolute(model_dir, ec).string();
  const fs::path dir = base / "fp4serve" / "weights";
  fs::create_directories(dir, ec);
  return dir / fmt::format("{:016x}-{}.bin", fnv1a(abs.data(), abs.size()), tier);
}

uint64_t free_bytes_for(const fs::path& file) {
  struct statvfs st {};
  if (::statvfs(file.parent_path().c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace fp4serve::tools
