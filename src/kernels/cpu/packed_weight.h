// Linear weights repacked once at load into the layout of the fast CPU tiers (avx512_bf16, amx):
// "panels" of 16 output rows whose bytes are one contiguous stream in k. Why: a GEMV thread then
// reads one sequential stream per panel (the hardware prefetcher's best case) instead of 8 short
// row streams side by side, and the bytes of 16 rows x 2 k land directly in the VNNI order that
// VDPBF16PS (16 output lanes) and AMX TDPBF16PS (B tile rows) consume: one dword per output row
// holding the bf16 pair (k even, k odd). The numbers are the view's (weights.h); only the order
// changes. Rows past N and k past K are zero (they add nothing).
//
// Per panel (rows n0 = 16p .. 16p+15, i = row in panel), K padded to kp = multiple of 64 (128 for
// kFp8Block, whose blocks the kernels never cut):
//   kBf16       kp/2 "pair rows" of 64 bytes: pair row r = for i in 0..15: [w(i, 2r), w(i, 2r+1)] (bf16).
//               Exactly an AMX B tile row: 16 consecutive pair rows are one 32-k B tile.
//   kFp8*       kp/4 "quads" of 64 e4m3 bytes, quad q = k 4q..4q+3, in the order that
//               unpacklo/unpackhi_epi8(low bytes, high bytes) of the bf16 conversion turns into pair
//               rows 2q and 2q+1:  byte 16(i/4) + 2(i%4) + j = w(i, 4q + j),
//                                  byte 16(i/4) + 8 + 2(i%4) + j = w(i, 4q + 2 + j),   j = 0, 1.
//               kFp8Block keeps one fp32 scale per (panel, 128-k block) in block_scales (16 rows
//               never straddle a 128-row scale block).
//   kNvfp4      kp/64 superblocks of 576 bytes: 64 bytes of e4m3 block scales (byte 16b + i = scale
//               of row i, 16-k block b of the superblock), then 8 "octets" of 64 bytes (octet o =
//               k 64s + 8o .. +7): 16-bit word j (i = j/2, kk = j%2) holds the four nibbles
//               w(i, ko + kk) | w(i, ko + 2 + kk) << 4 | w(i, ko + 4 + kk) << 8 | w(i, ko + 6 + kk) << 12,
//               so one VPERMW per nibble position (after a 0/4/8/12-bit shift) gives pair rows
//               4o .. 4o+3 with no widening or masking.
// The global scale (kFp8Tensor weight_scale, kNvfp4 weight_scale_2) stays a scalar, applied to the
// finished sum as the unpacked kernels do.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/weights.h"

namespace fp4serve::kernels {

constexpr int kPanelRows = 16;
constexpr int64_t kPanelKAlign = 64;

// Frees panel storage: 64-byte aligned; large buffers are their own huge-page mapping
// (packed_weight.cpp), so the deleter needs the size. bytes == 0: not owned (an arena's).
struct PanelStorageFree {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};

// Storage for many packed weights (a model's): a bump allocator over 256 MB mappings with
// transparent huge pages, freed together. Why: thousands of expert matrices of 0.6 MB each would
// otherwise fault in 4 KB pages at load (a third of the load time) and stream through 4 KB TLB
// entries at every decode step.
class PanelArena {
 public:
  PanelArena() = default;
  PanelArena(const PanelArena&) = delete;
  PanelArena& operator=(const PanelArena&) = delete;
  ~PanelArena();
  uint8_t* allocate(size_t bytes);  // 64-byte aligned, zeroed
  size_t mapped_bytes() const { return mapped_; }

 private:
  struct Mapping {
    uint8_t* base;
    size_t size;
  };
  std::vector<Mapping> maps_;
  size_t used_ = 0;  // in maps_.back()
  size_t mapped_ = 0;
};

struct PackedWeight {
  WeightLayout format = WeightLayout::kBf16;  // the source format: kBf16, kFp8Tensor, kFp8Block, kNvfp4
  int64_t n = 0, k = 0;                       // logical shape [n, k]
  int64_t kp = 0;                             // k rounded up to kPanelKAlign (kFp8Block: 128)
  int64_t panels = 0;                         // ceil(n / 16)
  int64_t panel_bytes = 0;                    // bytes of one panel's stream
  float tensor_scale = 1.0f;
  std::vector<float> block_scales;  // kFp8Block: [panels][kp/128 rounded up] fp32
  // kNvfp4: per panel, 1 when every block scale of it is a positive normal e4m3 code (exponent
  // field >= 1, sign 0): the kernels then convert scales by bit placement alone (3 instructions
  // for 16 instead of 8; the same values). Zero, subnormal or negative scales take the exact path.
  std::vector<uint8_t> normal_scales;

  const uint8_t* panel(int64_t p) const { return bytes_.get() + p * panel_bytes; }
  int64_t fp8_blocks_per_panel() const { return (kp + 127) / 128; }
  int64_t size_bytes() const { return panels * panel_bytes + static_cast<int64_t>(block_scales.size()) * 4; }

  // Owning storage, 64-byte aligned (AMX tile loads and aligned vector loads).
  std::unique_ptr<uint8_t, PanelStorageFree> bytes_;
};

// Formats and shapes the packed kernels take: bf16, fp8 (tensor, block), nvfp4.
bool packable(const WeightView& w);
// The panels of w (throws WeightLayoutError when !packable(w)). Parallel over panels. With an
// arena the bytes live there (the arena must outlive the result), else in storage of their own.
PackedWeight pack_weight(const WeightView& w, PanelArena* arena = nullptr);
// `w` with its packed form attached (w.packed = p); p must outlive the returned view.
WeightView with_packed(const WeightView& w, const PackedWeight& p);

// Reads rows [r0, r1) back from the panels as fp32 [rows, k] with the semantics of
// dequantize_rows_unscaled (block scales applied, the global scale not): what tests compare.
void unpack_rows_unscaled(const PackedWeight& p, int64_t r0, int64_t r1, float* out);

// One panel's bytes from the fast path (reference = false, what pack_weight uses where it can) or
// from the element-by-element definition (reference = true): tests check they are equal.
std::vector<uint8_t> pack_panel_for_test(const WeightView& w, int64_t panel, bool reference);

}  // namespace fp4serve::kernels
