// Host-side repacking of linear weights into the CUDA kernel's layout (linear_pack.h).
#include "kernels/cuda/linear_pack.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/thread_pool.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::cuda {
namespace {

std::string describe(const WeightView& w) {
  return std::string(weight_layout_name(w.format)) + " [" + std::to_string(w.n) + ", " + std::to_string(w.k) + "]";
}

// Writes the words of column tiles [tile0, tile1) to dst (the first of them at dst) from
// `code_at(n, k)` (the raw code of W(n, k) for n < N, k < K), tiles in parallel (each tile's words
// are its own). The format is a template parameter so that the inner loop has no per-value
// dispatch: the model's ~35e9 expert weights are packed at every start.
template <PackedKind KIND, class CodeAt>
void pack_words(const PackedShape& s, int64_t tile0, int64_t tile1, uint32_t* out, uint32_t zero, CodeAt code_at) {
  constexpr int kBits = value_bits(KIND), kVecs = vecs_per_step(KIND), kWords = 4 * kVecs;
  cpu::parallel_for(tile1 - tile0, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t tile = tile0 + t0; tile < tile0 + t1; ++tile)
      for (int64_t step = 0; step < s.steps; ++step)
        for (int lane = 0; lane < 32; ++lane) {
          const int64_t n = tile * kTileN + value_dn(lane), k0 = step * kStepK;
          const bool row_in = n < s.n, all_in = row_in && k0 + kStepK <= s.k;
          uint32_t words[kWords] = {};
#pragma GCC unroll 8
          for (int j = 0; j < kTilesPerStep; ++j)
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) {
              const int64_t k = k0 + value_dk(lane, j, i);
              const uint32_t code = (all_in || (row_in && k < s.k)) ? code_at(n, k) : zero;
              words[value_word(kBits, j, i)] |= place_code(KIND, j, i, code);
            }
          // The lane's vector q starts q * 32 vectors (q * 128 words) after its vector 0.
          uint32_t* dst = out + vector_index(tile - tile0, s.steps, step, kVecs, 0, lane) * 4;
          for (int w = 0; w < kWords; ++w) dst[(w / 4) * 32 * 4 + w % 4] = words[w];
        }
  });
}

void pack_codes(const PackedShape& s, const WeightView& w, int64_t tile0, int64_t tile1, uint32_t* out, uint32_t zero) {
  const auto* u8 = static_cast<const uint8_t*>(w.data);
  const int64_t ld = w.ld;
  switch (w.format) {
    case WeightLayout::kBf16: {
      const auto* u16 = static_cast<const uint16_t*>(w.data);
      pack_words<PackedKind::kBf16>(s, tile0, tile1, out, zero,
                                    [=](int64_t n, int64_t k) -> uint32_t { return u16[n * ld + k]; });
      break;
    }
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block:
      pack_words<PackedKind::kFp8>(s, tile0, tile1, out, zero,
                                   [=](int64_t n, int64_t k) -> uint32_t { return u8[n * ld + k]; });
      break;
    case WeightLayout::kNvfp4:
      pack_words<PackedKind::kFp4>(s, tile0, tile1, out, zero, [=](int64_t n, int64_t k) -> uint32_t {
        const uint8_t byte = u8[n * (ld / 2) + k / 2];
        return (k & 1) ? (byte >> 4) : (byte & 0xF);
      });
      break;
    case WeightLayout::kInt4Packed:
      pack_words<PackedKind::kInt4>(s, tile0, tile1, out, zero, [=](int64_t n, int64_t k) -> uint32_t {
        const uint8_t byte = u8[n * (ld / 2) + k / 2];
        return (k & 1) ? (byte >> 4) : (byte & 0xF);
      });
      break;
    case WeightLayout::kInt4Gptq: {
      const auto* q = static_cast<const int32_t*>(w.data);
      pack_words<PackedKind::kInt4>(s, tile0, tile1, out, zero, [=](int64_t n, int64_t k) -> uint32_t {
        return (static_cast<uint32_t>(q[(k / 8) * ld + n]) >> (4 * (k % 8))) & 0xF;
      });
      break;
    }
  }
}

// The code of a padding position: the value 0 (int4's zero point is 8).
uint32_t zero_code(PackedKind kind) { return kind == PackedKind::kInt4 ? 8u : 0u; }

// The fp32 scale of W(n, k) that multiplies partial sums (kFp8Block, kInt4*).
float unit_scale_of(const WeightView& w, int64_t n, int64_t k) {
  switch (w.format) {
    case WeightLayout::kFp8Block: {
      const int64_t si = (n / 128) * w.scale_ld + k / 128;
      return w.scales_bf16 ? bf16_to_f32(static_cast<const uint16_t*>(w.scales)[si])
                           : static_cast<const float*>(w.scales)[si];
    }
    case WeightLayout::kInt4Gptq:
      return f16_to_f32(static_cast<const uint16_t*>(w.scales)[(k / w.group) * w.scale_ld + n]);
    case WeightLayout::kInt4Packed:
      return static_cast<const float*>(w.scales)[n * w.scale_ld + k / w.group];
    default:
      return 1.0f;
  }
}

int unit_tiles_for(const WeightView& w) {
  if (w.format == WeightLayout::kFp8Block) return kTilesPerStep;
  if (w.format != WeightLayout::kInt4Gptq && w.format != WeightLayout::kInt4Packed) return 0;
  if (w.group > 0 && w.group % kStepK == 0) return kTilesPerStep;  // the group's scale on each 128 of it
  if (w.group >= 16 && w.group % 16 == 0 && kStepK % w.group == 0) return w.group / 16;
  throw std::invalid_argument("cuda prepare_linear: " + describe(w) + " int4 group " + std::to_string(w.group) +
                              " is neither 16, 32, 64 nor a multiple of 128");
}

}  // namespace

PackedKind packed_kind(WeightLayout format) {
  switch (format) {
    case WeightLayout::kBf16:
      return PackedKind::kBf16;
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block:
      return PackedKind::kFp8;
    case WeightLayout::kNvfp4:
      return PackedKind::kFp4;
    case WeightLayout::kInt4Gptq:
    case WeightLayout::kInt4Packed:
      return PackedKind::kInt4;
  }
  throw std::invalid_argument("cuda prepare_linear: unknown weight layout");
}

PackedShape packed_shape(const WeightView& w) {
  if (w.n <= 0 || w.k <= 0 || w.data == nullptr)
    throw std::invalid_argument("cuda prepare_linear: empty weight " + describe(w));
  if (w.format != WeightLayout::kBf16 && w.format != WeightLayout::kFp8Tensor && w.scales == nullptr)
    throw std::invalid_argument("cuda prepare_linear: weight " + describe(w) + " without scales");
  if (w.n > (int64_t{1} << 30) || w.k > (int64_t{1} << 30))
    throw std::invalid_argument("cuda prepare_linear: weight " + describe(w) + " too large");
  PackedShape s;
  s.format = w.format;
  s.kind = packed_kind(w.format);
  s.n = w.n;
  s.k = w.k;
  s.n_tiles = (w.n + kBlockN - 1) / kBlockN * kBlockTilesN;
  s.steps = (w.k + kStepK - 1) / kStepK;
  s.unit_tiles = unit_tiles_for(w);
  s.tensor_scale = (w.format == WeightLayout::kFp8Tensor || w.format == WeightLayout::kNvfp4) ? w.tensor_scale : 1.0f;
  return s;
}

namespace {
void expect_range(int64_t begin, int64_t end, int64_t count, const char* what) {
  if (begin < 0 || end < begin || end > count)
    throw std::invalid_argument(std::string("cuda pack: ") + what + " range [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") outside [0, " + std::to_string(count) + ")");
}
}  // namespace

void pack_words_into(const PackedShape& s, const WeightView& w, int64_t tile0, int64_t tile1, void* dst) {
  expect_range(tile0, tile1, s.n_tiles, "tile");
  pack_codes(s, w, tile0, tile1, static_cast<uint32_t*>(dst), zero_code(s.kind));
}

void pack_fp4_scales_into(const PackedShape& s, const WeightView& w, int64_t tile0, int64_t tile1, void* dst) {
  expect_range(tile0, tile1, s.n_tiles, "tile");
  if (s.kind != PackedKind::kFp4) return;
  auto* out = static_cast<uint8_t*>(dst);
  const auto* sc = static_cast<const uint8_t*>(w.scales);
  for (int64_t tile = tile0; tile < tile1; ++tile)
    for (int64_t step = 0; step < s.steps; ++step)
      for (int dn = 0; dn < kTileN; ++dn)
        for (int j = 0; j < kTilesPerStep; ++j) {
          const int64_t n = tile * kTileN + dn, k = step * kStepK + j * 16;
          out[fp4_scale_index(tile - tile0, s.steps, step, dn) + j] = (n < w.n && k < w.k) ? sc[n * w.scale_ld + k / 16] : 0;
        }
}

void pack_unit_scales_into(const PackedShape& s, const WeightView& w, int64_t unit0, int64_t unit1, void* dst) {
  expect_range(unit0, unit1, s.units(), "unit");
  if (!s.unit_tiles) return;
  auto* out = static_cast<float*>(dst);
  const int64_t unit_k = int64_t{s.unit_tiles} * 16, n_pad = s.n_pad();
  for (int64_t u = unit0; u < unit1; ++u) {
    float* row = out + (u - unit0) * n_pad;
    for (int64_t n = 0; n < n_pad; ++n) row[n] = (n < w.n && u * unit_k < w.k) ? unit_scale_of(w, n, u * unit_k) : 0.0f;
  }
}

PackedLinear pack_linear(const WeightView& w) {
  PackedLinear p;
  static_cast<PackedShape&>(p) = packed_shape(w);
  p.words.resize(p.word_bytes() / sizeof(uint32_t));
  pack_words_into(p, w, 0, p.n_tiles, p.words.data());
  p.fp4_scales.resize(p.fp4_scale_bytes());
  pack_fp4_scales_into(p, w, 0, p.n_tiles, p.fp4_scales.data());
  p.unit_scales.resize(p.unit_scale_bytes() / sizeof(float));
  pack_unit_scales_into(p, w, 0, p.units(), p.unit_scales.data());
  return p;
}

float packed_fragment_value(const PackedLinear& p, int64_t tile, int64_t step, int lane, int j, int i) {
  const int vecs = vecs_per_step(p.kind), b = i >> 1, word = fragment_word(p.kind, j, b);
  const uint32_t w = p.words[static_cast<size_t>(vector_index(tile, p.steps, step, vecs, word / 4, lane) * 4 + word % 4)];
  uint32_t scale2 = 0;
  if (p.kind == PackedKind::kFp4)
    scale2 = fp4_scale_pair(p.fp4_scales[static_cast<size_t>(fp4_scale_index(tile, p.steps, step, value_dn(lane)) + j)]);
  const uint32_t pair = fragment_pair(p.kind, w, j, b, scale2);
  return bits_to_float(((pair >> (16 * (i & 1))) & 0xFFFFu) << 16);
}

float packed_weight_value(const PackedLinear& p, int64_t n, int64_t k) {
  // The inverse of (value_dn, value_dk): which lane, tile j and value i hold (n, k).
  const int64_t tile = n / kTileN, step = k / kStepK;
  const int dn = static_cast<int>(n % kTileN), kk = static_cast<int>(k % kStepK);
  const int j = kk / 16, r = kk % 16;
  const int lane = dn * 4 + (r % 8) / 2, i = (r & 1) + (r >= 8 ? 2 : 0);
  float v = packed_fragment_value(p, tile, step, lane, j, i);
  if (p.unit_tiles) v *= p.unit_scales[static_cast<size_t>(unit_of(step, j, p.unit_tiles) * p.n_pad() + n)];
  return v;
}

std::vector<std::vector<int>> plan_launches(const std::vector<LaunchKey>& outputs, int max_per_launch) {
  std::vector<std::vector<int>> launches;
  std::vector<bool> placed(outputs.size(), false);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (placed[i]) continue;
    std::vector<int> group;
    for (size_t j = i; j < outputs.size() && static_cast<int>(group.size()) < max_per_launch; ++j)
      if (!placed[j] && outputs[j].kind == outputs[i].kind && outputs[j].unit_tiles == outputs[i].unit_tiles) {
        group.push_back(static_cast<int>(j));
        placed[j] = true;
      }
    launches.push_back(std::move(group));
  }
  return launches;
}

}  // namespace fp4serve::kernels::cuda
