#include "kernels/packed_weight.h"

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

void pack_panel(const WeightView& w, const PackedWeight& p, int64_t pi, uint8_t* dst) {
  const int64_t n0 = pi * kPanelRows;
  switch (w.format) {
    case WeightFormat::kBf16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t r = 0; r < p.kp / 2; ++r)
        for (int i = 0; i < kPanelRows; ++i) {
          out[r * 32 + 2 * i] = bf16_code(w, n0 + i, 2 * r);
          out[r * 32 + 2 * i + 1] = bf16_code(w, n0 + i, 2 * r + 1);
        }
      break;
    }
    case WeightFormat::kFp8Tensor:
    case WeightFormat::kFp8Block:
      for (int64_t q = 0; q < p.kp / 4; ++q)
        for (int i = 0; i < kPanelRows; ++i)
          for (int kk = 0; kk < 4; ++kk) dst[q * 64 + fp8_quad_offset(i, kk)] = fp8_code(w, n0 + i, 4 * q + kk);
      break;
    case WeightFormat::kNvfp4:
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

}  // namespace

bool packable(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::kBf16:
    case WeightFormat::kFp8Tensor:
    case WeightFormat::kNvfp4:
      return w.n > 0 && w.k > 0 && w.data != nullptr;
    case WeightFormat::kFp8Block:
      return w.n > 0 && w.k > 0 && w.data != nullptr && w.scales != nullptr;
    default:
      return false;
  }
}

PackedWeight pack_weight(const WeightView& w) {
  if (!packable(w))
    throw WeightLayoutError(std::string("pack_weight: the panel layout does not take ") + weight_format_name(w.format) +
                            " weights");
  PackedWeight p;
  p.format = w.format;
  p.n = w.n;
  p.k = w.k;
  // FP8 block panels end on a whole 128-k scale block (the kernels run blocks without tails).
  p.kp = round_up(w.k, w.format == WeightFormat::kFp8Block ? 128 : kPanelKAlign);
  p.panels = (w.n + kPanelRows - 1) / kPanelRows;
  p.tensor_scale = w.tensor_scale;
  switch (w.format) {
    case WeightFormat::kBf16: p.panel_bytes = p.kp * 32; break;
    case WeightFormat::kFp8Tensor:
    case WeightFormat::kFp8Block: p.panel_bytes = p.kp * 16; break;
    case WeightFormat::kNvfp4: p.panel_bytes = p.kp / 64 * 576; break;
    default: break;
  }
  const size_t total = static_cast<size_t>(p.panels * p.panel_bytes);
  p.bytes_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, round_up(static_cast<int64_t>(total), 64))));
  if (!p.bytes_) throw std::bad_alloc();
  if (w.format == WeightFormat::kFp8Block) {
    const int64_t nb = p.fp8_blocks_per_panel();
    p.block_scales.resize(static_cast<size_t>(p.panels * nb));
    for (int64_t pi = 0; pi < p.panels; ++pi)
      for (int64_t b = 0; b < nb; ++b) p.block_scales[pi * nb + b] = fp8_block_scale(w, pi * kPanelRows, b);
  }
  uint8_t* base = p.bytes_.get();
  cpu::parallel_for(p.panels, 1, [&](int64_t a, int64_t b) {
    for (int64_t pi = a; pi < b; ++pi) pack_panel(w, p, pi, base + pi * p.panel_bytes);
  });
  return p;
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
        case WeightFormat::kBf16: {
          uint16_t c;
          std::memcpy(&c, panel + (k / 2) * 64 + (2 * i + (k & 1)) * 2, 2);
          v = bf16_to_f32(c);
          break;
        }
        case WeightFormat::kFp8Tensor:
        case WeightFormat::kFp8Block:
          v = e4m3_to_f32(panel[(k / 4) * 64 + fp8_quad_offset(i, static_cast<int>(k % 4))]);
          if (p.format == WeightFormat::kFp8Block)
            v *= p.block_scales[(n / kPanelRows) * p.fp8_blocks_per_panel() + k / 128];
          break;
        case WeightFormat::kNvfp4: {
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
