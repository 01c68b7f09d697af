#include "kernels/cpu/packed_weight.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "kernels/cpu/thread_pool.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Raw codes of the source view (zero outside [n, k]): the packer moves codes, never values.
uint16_t bf16_code(const WeightView& w, int64_t n, int64_t k) {
  if (n >= w.n || k >= w.k) return 0;
  return static_cast<const uint16_t*>(w.data)[n * w.ld + k];
}
uint8_t fp8_code(const WeightView& w, int64_t n, int64_t k) {
  if (n >= w.n || k >= w.k) return 0;
  return static_cast<const uint8_t*>(w.data)[n * w.ld + k];
}
uint8_t nibble_code(const WeightView& w, int64_t n, int64_t k) {
  if (n >= w.n || k >= w.k) return 0;
  const uint8_t b = static_cast<const uint8_t*>(w.data)[n * (w.ld / 2) + k / 2];
  return (k & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0x0F);
}
uint8_t nvfp4_scale_code(const WeightView& w, int64_t n, int64_t block) {
  if (n >= w.n || block * 16 >= w.k) return 0;
  return static_cast<const uint8_t*>(w.scales)[n * w.scale_ld + block];
}
float fp8_block_scale(const WeightView& w, int64_t n, int64_t kblock) {
  if (n >= w.n || kblock * 128 >= w.k) return 0.0f;
  const int64_t si = (n / 128) * w.scale_ld + kblock;
  if (w.scales_bf16) return bf16_to_f32(static_cast<const uint16_t*>(w.scales)[si]);
  return static_cast<const float*>(w.scales)[si];
}

// Byte offset of w(i, k) inside an fp8 quad (64 bytes, k = 4q + kk).
int fp8_quad_offset(int i, int kk) { return 16 * (i / 4) + (kk >= 2 ? 8 : 0) + 2 * (i % 4) + (kk & 1); }

// Fast paths for a panel whose 16 rows and whole k range exist in the view (all but the last panel
// and K tails): the same bytes as pack_panel_reference, by word and nibble moves.
bool full_panel(const WeightView& w, const PackedWeight& p, int64_t n0) { return n0 + kPanelRows <= w.n && p.kp == w.k; }

void pack_full_bf16(const WeightView& w, int64_t n0, int64_t kp, uint8_t* dst) {
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int i = 0; i < kPanelRows; ++i) {
    const uint16_t* row = src + (n0 + i) * w.ld;
    for (int64_t r = 0; r < kp / 2; ++r) std::memcpy(dst + r * 64 + 4 * i, row + 2 * r, 4);
  }
}

void pack_full_fp8(const WeightView& w, int64_t n0, int64_t kp, uint8_t* dst) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int i = 0; i < kPanelRows; ++i) {
    const uint8_t* row = src + (n0 + i) * w.ld;
    const int off = 16 * (i / 4) + 2 * (i % 4);
    for (int64_t q = 0; q < kp / 4; ++q) {
      std::memcpy(dst + q * 64 + off, row + 4 * q, 2);
      std::memcpy(dst + q * 64 + off + 8, row + 4 * q + 2, 2);
    }
  }
}

void pack_full_nvfp4(const WeightView& w, int64_t n0, int64_t kp, uint8_t* dst) {
  const auto* src = static_cast<const uint8_t*>(w.data) + n0 * (w.ld / 2);
  const auto* sc = static_cast<const uint8_t*>(w.scales) + n0 * w.scale_ld;
  for (int64_t s = 0; s < kp / 64; ++s) {  // one 576-byte superblock at a time, all 16 rows
    uint8_t* sb = dst + s * 576;
    for (int i = 0; i < kPanelRows; ++i) {
      const uint8_t* row = src + i * (w.ld / 2) + 32 * s;
      const uint8_t* srow = sc + i * w.scale_ld + 4 * s;
      for (int b = 0; b < 4; ++b) sb[16 * b + i] = srow[b];
      for (int o = 0; o < 8; ++o) {
        uint32_t v;  // k 64s + 8o .. +7: 8 nibbles, low nibble = even k
        std::memcpy(&v, row + 4 * o, 4);
        const uint32_t even = (v & 0xF) | ((v >> 4) & 0xF0) | ((v >> 8) & 0xF00) | ((v >> 12) & 0xF000);
        const uint32_t odd = ((v >> 4) & 0xF) | ((v >> 8) & 0xF0) | ((v >> 12) & 0xF00) | ((v >> 16) & 0xF000);
        const uint32_t both = even | (odd << 16);  // words 2i, 2i+1
        std::memcpy(sb + 64 + 64 * o + 4 * i, &both, 4);
      }
    }
  }
}

// The packed bytes of one panel, from the layout's definition (packed_weight.h) element by element:
// the reference the fast paths must equal, and the path for partial panels.
void pack_panel_reference(const WeightView& w, const PackedWeight& p, int64_t pi, uint8_t* dst) {
  const int64_t n0 = pi * kPanelRows;
  switch (w.format) {
    case WeightLayout::kBf16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t r = 0; r < p.kp / 2; ++r)
        for (int i = 0; i < kPanelRows; ++i) {
          out[r * 32 + 2 * i] = bf16_code(w, n0 + i, 2 * r);
          out[r * 32 + 2 * i + 1] = bf16_code(w, n0 + i, 2 * r + 1);
        }
      break;
    }
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block:
      for (int64_t q = 0; q < p.kp / 4; ++q)
        for (int i = 0; i < kPanelRows; ++i)
          for (int kk = 0; kk < 4; ++kk) dst[q * 64 + fp8_quad_offset(i, kk)] = fp8_code(w, n0 + i, 4 * q + kk);
      break;
    case WeightLayout::kNvfp4:
      for (int64_t s = 0; s < p.kp / 64; ++s) {
        uint8_t* sb = dst + s * 576;
        for (int b = 0; b < 4; ++b)
          for (int i = 0; i < kPanelRows; ++i) sb[16 * b + i] = nvfp4_scale_code(w, n0 + i, 4 * s + b);
        for (int o = 0; o < 8; ++o)
          for (int j = 0; j < 32; ++j) {
            const int i = j / 2, kk = j % 2;
            const int64_t ko = 64 * s + 8 * o;
            uint16_t word = 0;
            for (int t = 0; t < 4; ++t) word = static_cast<uint16_t>(word | nibble_code(w, n0 + i, ko + 2 * t + kk) << (4 * t));
            std::memcpy(sb + 64 + 64 * o + 2 * j, &word, 2);
          }
      }
      break;
    default:
      break;
  }
}

void pack_panel(const WeightView& w, const PackedWeight& p, int64_t pi, uint8_t* dst, bool reference) {
  const int64_t n0 = pi * kPanelRows;
  if (!reference && full_panel(w, p, n0)) {
    switch (w.format) {
      case WeightLayout::kBf16: return pack_full_bf16(w, n0, p.kp, dst);
      case WeightLayout::kFp8Tensor:
      case WeightLayout::kFp8Block: return pack_full_fp8(w, n0, p.kp, dst);
      case WeightLayout::kNvfp4: return pack_full_nvfp4(w, n0, p.kp, dst);
      default: break;
    }
  }
  pack_panel_reference(w, p, pi, dst);
}

// An anonymous mapping with transparent huge pages (advice: fine if the kernel has THP off). A 4 KB
// page fault per 4 KB of packed weights made the kernel's page zeroing a third of load time.
uint8_t* map_huge(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

// Storage of one packed weight outside an arena: 64-byte aligned; large ones get their own mapping.
constexpr size_t kHugeThreshold = size_t{4} << 20;

uint8_t* allocate_panels(size_t bytes) {
  if (bytes >= kHugeThreshold) return map_huge(bytes);
  void* p = std::aligned_alloc(64, static_cast<size_t>(round_up(static_cast<int64_t>(bytes), 64)));
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

// The shape fields of w's panels (no storage): the layout's padding rules of packed_weight.h.
PackedWeight panel_shape(const WeightView& w) {
  PackedWeight p;
  p.format = w.format;
  p.n = w.n;
  p.k = w.k;
  // FP8 block panels end on a whole 128-k scale block (the kernels run blocks without tails).
  p.kp = round_up(w.k, w.format == WeightLayout::kFp8Block ? 128 : kPanelKAlign);
  p.panels = (w.n + kPanelRows - 1) / kPanelRows;
  p.tensor_scale = w.tensor_scale;
  switch (w.format) {
    case WeightLayout::kBf16: p.panel_bytes = p.kp * 32; break;
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block: p.panel_bytes = p.kp * 16; break;
    case WeightLayout::kNvfp4: p.panel_bytes = p.kp / 64 * 576; break;
    default: break;
  }
  return p;
}

}  // namespace

PanelArena::~PanelArena() {
  for (const Mapping& m : maps_) munmap(m.base, m.size);
}

uint8_t* PanelArena::allocate(size_t bytes) {
  constexpr size_t kChunk = size_t{256} << 20;
  bytes = static_cast<size_t>(round_up(static_cast<int64_t>(bytes), 64));
  if (maps_.empty() || used_ + bytes > maps_.back().size) {
    const size_t size = std::max(kChunk, static_cast<size_t>(round_up(static_cast<int64_t>(bytes), int64_t{2} << 20)));
    maps_.push_back({map_huge(size), size});
    mapped_ += size;
    used_ = 0;
  }
  uint8_t* out = maps_.back().base + used_;
  used_ += bytes;
  return out;
}

void PanelStorageFree::operator()(uint8_t* p) const {
  if (p == nullptr || bytes == 0) return;
  if (bytes >= kHugeThreshold)
    munmap(p, bytes);
  else
    std::free(p);
}

bool packable(const WeightView& w) {
  switch (w.format) {
    case WeightLayout::kBf16:
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kNvfp4:
      return w.n > 0 && w.k > 0 && w.data != nullptr;
    case WeightLayout::kFp8Block:
      return w.n > 0 && w.k > 0 && w.data != nullptr && w.scales != nullptr;
    default:
      return false;
  }
}

PackedWeight pack_weight(const WeightView& w, PanelArena* arena) {
  if (!packable(w))
    throw WeightLayoutError(std::string("pack_weight: the panel layout does not take ") + weight_layout_name(w.format) +
                            " weights");
  PackedWeight p = panel_shape(w);
  const size_t total = static_cast<size_t>(p.panels * p.panel_bytes);
  if (arena != nullptr)
    p.bytes_ = std::unique_ptr<uint8_t, PanelStorageFree>(arena->allocate(total), PanelStorageFree{0});
  else
    p.bytes_ = std::unique_ptr<uint8_t, PanelStorageFree>(allocate_panels(total), PanelStorageFree{total});
  if (w.format == WeightLayout::kFp8Block) {
    const int64_t nb = p.fp8_blocks_per_panel();
    p.block_scales.resize(static_cast<size_t>(p.panels * nb));
    for (int64_t pi = 0; pi < p.panels; ++pi)
      for (int64_t b = 0; b < nb; ++b) p.block_scales[pi * nb + b] = fp8_block_scale(w, pi * kPanelRows, b);
  }
  uint8_t* base = p.bytes_.get();
  if (w.format == WeightLayout::kNvfp4) p.normal_scales.assign(static_cast<size_t>(p.panels), 0);
  cpu::parallel_for(p.panels, 1, [&](int64_t a, int64_t b) {
    for (int64_t pi = a; pi < b; ++pi) {
      uint8_t* panel = base + pi * p.panel_bytes;
      pack_panel(w, p, pi, panel, false);
      if (w.format == WeightLayout::kNvfp4) {
        // Real rows and blocks only: padding rows are masked at the store and padding blocks hold
        // zero weights, so any scale there gives the same results.
        const int64_t rows = std::min<int64_t>(kPanelRows, w.n - pi * kPanelRows), blocks = w.k / 16;
        bool normal = true;
        for (int64_t b = 0; b < blocks && normal; ++b)
          for (int64_t i = 0; i < rows; ++i) {
            const uint8_t c = panel[(b / 4) * 576 + 16 * (b % 4) + i];
            normal = normal && (c & 0x80) == 0 && (c & 0x78) != 0;
          }
        p.normal_scales[static_cast<size_t>(pi)] = normal ? 1 : 0;
      }
    }
  });
  return p;
}

std::vector<uint8_t> pack_panel_for_test(const WeightView& w, int64_t panel, bool reference) {
  const PackedWeight shape = panel_shape(w);
  std::vector<uint8_t> out(static_cast<size_t>(shape.panel_bytes));
  pack_panel(w, shape, panel, out.data(), reference);
  return out;
}

WeightView with_packed(const WeightView& w, const PackedWeight& p) {
  if (p.n != w.n || p.k != w.k || p.format != w.format)
    throw WeightLayoutError("with_packed: the packed weight has another shape or format than the view");
  WeightView v = w;
  v.packed = &p;
  return v;
}

void unpack_rows_unscaled(const PackedWeight& p, int64_t r0, int64_t r1, float* out) {
  for (int64_t n = r0; n < r1; ++n) {
    const uint8_t* panel = p.panel(n / kPanelRows);
    const int i = static_cast<int>(n % kPanelRows);
    float* row = out + (n - r0) * p.k;
    for (int64_t k = 0; k < p.k; ++k) {
      float v = 0.0f;
      switch (p.format) {
        case WeightLayout::kBf16: {
          uint16_t c;
          std::memcpy(&c, panel + (k / 2) * 64 + (2 * i + (k & 1)) * 2, 2);
          v = bf16_to_f32(c);
          break;
        }
        case WeightLayout::kFp8Tensor:
        case WeightLayout::kFp8Block:
          v = e4m3_to_f32(panel[(k / 4) * 64 + fp8_quad_offset(i, static_cast<int>(k % 4))]);
          if (p.format == WeightLayout::kFp8Block)
            v *= p.block_scales[(n / kPanelRows) * p.fp8_blocks_per_panel() + k / 128];
          break;
        case WeightLayout::kNvfp4: {
          const uint8_t* sb = panel + (k / 64) * 576;
          const int o = static_cast<int>(k % 64) / 8, t = static_cast<int>(k % 8) / 2, kk = static_cast<int>(k % 2);
          uint16_t word;
          std::memcpy(&word, sb + 64 + 64 * o + 2 * (2 * i + kk), 2);
          v = e2m1_to_f32(static_cast<uint8_t>((word >> (4 * t)) & 0x0F)) * e4m3_to_f32(sb[16 * ((k % 64) / 16) + i]);
          break;
        }
        default:
          break;
      }
      row[k] = v;
    }
  }
}

}  // namespace fp4serve::kernels
