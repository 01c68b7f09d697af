#include "kernels/cpu/packed_weight_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace fp4serve::kernels::cpu {
namespace {

constexpr char kMagic[8] = {'F', 'P', '4', 'S', 'P', 'W', 'C', '\0'};
constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kAlign = 4096;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t key_bytes;
  uint64_t entries;
  uint64_t index_offset;
  uint64_t index_bytes;
};

// One index record before its scales.
struct Record {
  uint8_t format;
  uint8_t pad[3];
  float tensor_scale;
  int64_t n, k, kp, panels, panel_bytes;
  uint64_t offset;
  uint64_t block_scales;   // count of fp32
  uint64_t normal_scales;  // count of bytes
};

uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool write_all(int fd, const void* data, size_t size, uint64_t offset, std::string& error) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      error = std::strerror(errno);
      return false;
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// ---- reader ---------------------------------------------------------------------------------

std::unique_ptr<PackedWeightCacheReader> PackedWeightCacheReader::open(const std::filesystem::path& file,
                                                                       const std::string& key, std::string* why) {
  auto fail = [&](const std::string& w) -> std::unique_ptr<PackedWeightCacheReader> {
    if (why) *why = w;
    return nullptr;
  };
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno == ENOENT ? "no cache file yet" : std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < kHeaderBytes) {
    ::close(fd);
    return fail("file too short");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return fail(std::string("mmap failed: ") + std::strerror(errno));
  std::unique_ptr<PackedWeightCacheReader> r(new PackedWeightCacheReader());
  r->base_ = static_cast<uint8_t*>(base);
  r->size_ = size;
  Header h;
  std::memcpy(&h, r->base_, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) return fail("not a packed-weight cache file");
  if (h.version != kPackedWeightCacheVersion)
    return fail("made by cache format version " + std::to_string(h.version) + ", this build writes " +
                std::to_string(kPackedWeightCacheVersion));
  if (sizeof h + h.key_bytes > kHeaderBytes) return fail("corrupt header");
  const std::string file_key(reinterpret_cast<const char*>(r->base_ + sizeof h), h.key_bytes);
  if (file_key != key) return fail("stale: made for another checkpoint, tier or build");
  if (h.index_offset > size || h.index_bytes > size - h.index_offset) return fail("torn file (index out of range)");
  const uint8_t* p = r->base_ + h.index_offset;
  const uint8_t* end = p + h.index_bytes;
  for (uint64_t i = 0; i < h.entries; ++i) {
    Record rec;
    if (static_cast<uint64_t>(end - p) < sizeof rec) return fail("torn index");
    std::memcpy(&rec, p, sizeof rec);
    p += sizeof rec;
    const uint64_t extra = rec.block_scales * 4 + rec.normal_scales;
    if (static_cast<uint64_t>(end - p) < extra) return fail("torn index");
    const uint64_t bytes = static_cast<uint64_t>(rec.panels) * static_cast<uint64_t>(rec.panel_bytes);
    if (rec.offset % 64 != 0 || rec.offset > size || bytes > size - rec.offset) return fail("entry out of range");
    Entry e{static_cast<WeightLayout>(rec.format), rec.n, rec.k, rec.kp, rec.panels, rec.panel_bytes,
            rec.tensor_scale, rec.offset, {}, {}};
    e.block_scales.resize(rec.block_scales);
    std::memcpy(e.block_scales.data(), p, rec.block_scales * 4);
    p += rec.block_scales * 4;
    e.normal_scales.assign(p, p + rec.normal_scales);
    p += rec.normal_scales;
    r->entries_.push_back(std::move(e));
  }
  // Ask the kernel to start reading (a no-op when the page cache holds it already).
  ::madvise(r->base_, size, MADV_WILLNEED);
  return r;
}

PackedWeightCacheReader::~PackedWeightCacheReader() {
  if (base_) ::munmap(base_, size_);
}

bool PackedWeightCacheReader::take(size_t i, const WeightView& w, PackedWeight& out) const {
  if (i >= entries_.size()) return false;
  const Entry& e = entries_[i];
  if (e.format != w.format || e.n != w.n || e.k != w.k || e.tensor_scale != w.tensor_scale) return false;
  out.format = e.format;
  out.n = e.n;
  out.k = e.k;
  out.kp = e.kp;
  out.panels = e.panels;
  out.panel_bytes = e.panel_bytes;
  out.tensor_scale = e.tensor_scale;
  out.block_scales = e.block_scales;
  out.normal_scales = e.normal_scales;
  out.bytes_ = std::unique_ptr<uint8_t, PanelStorageFree>(base_ + e.offset, PanelStorageFree{0});
  return true;
}

// ---- writer ---------------------------------------------------------------------------------

PackedWeightCacheWriter::PackedWeightCacheWriter(std::filesystem::path file, std::string key)
    : file_(std::move(file)), key_(std::move(key)) {
  if (sizeof(Header) + key_.size() > kHeaderBytes) throw std::runtime_error("packed-weight cache key too long");
  tmp_ = file_.string() + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create " + tmp_.string() + ": " + std::strerror(errno));
  end_ = kHeaderBytes;
}

PackedWeightCacheWriter::~PackedWeightCacheWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

void PackedWeightCacheWriter::add(const PackedWeight& p) {
  if (!error_.empty()) return;
  const uint64_t offset = align_up(end_);
  const uint64_t bytes = static_cast<uint64_t>(p.panels) * static_cast<uint64_t>(p.panel_bytes);
  if (!write_all(fd_, p.panel(0), bytes, offset, error_)) return;
  end_ = offset + bytes;
  Record rec{};
  rec.format = static_cast<uint8_t>(p.format);
  rec.tensor_scale = p.tensor_scale;
  rec.n = p.n;
  rec.k = p.k;
  rec.kp = p.kp;
  rec.panels = p.panels;
  rec.panel_bytes = p.panel_bytes;
  rec.offset = offset;
  rec.block_scales = p.block_scales.size();
  rec.normal_scales = p.normal_scales.size();
  std::vector<uint8_t> r(sizeof rec + rec.block_scales * 4 + rec.normal_scales);
  std::memcpy(r.data(), &rec, sizeof rec);
  std::memcpy(r.data() + sizeof rec, p.block_scales.data(), rec.block_scales * 4);
  std::memcpy(r.data() + sizeof rec + rec.block_scales * 4, p.normal_scales.data(), rec.normal_scales);
  index_.push_back(std::move(r));
}

bool PackedWeightCacheWriter::commit(std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (!error_.empty()) return fail("writing " + tmp_.string() + ": " + error_);
  std::vector<uint8_t> index;
  for (const auto& r : index_) index.insert(index.end(), r.begin(), r.end());
  const uint64_t index_offset = end_;
  if (!write_all(fd_, index.data(), index.size(), index_offset, error_))
    return fail("writing " + tmp_.string() + ": " + error_);
  std::vector<uint8_t> head(kHeaderBytes, 0);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kPackedWeightCacheVersion;
  h.key_bytes = static_cast<uint32_t>(key_.size());
  h.entries = index_.size();
  h.index_offset = index_offset;
  h.index_bytes = index.size();
  std::memcpy(head.data(), &h, sizeof h);
  std::memcpy(head.data() + sizeof h, key_.data(), key_.size());
  if (!write_all(fd_, head.data(), head.size(), 0, error_)) return fail("writing " + tmp_.string() + ": " + error_);
  if (::fsync(fd_) != 0) return fail("fsync " + tmp_.string() + ": " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  std::filesystem::rename(tmp_, file_, ec);
  if (ec) return fail("rename to " + file_.string() + ": " + ec.message());
  committed_ = true;
  return true;
}

}  // namespace fp4serve::kernels::cpu
