#include "kernels/weights.h"

#include "kernels/cpu/dequant_scalar.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels {
namespace {

void require(bool ok, const std::string& what, const std::string& msg) {
  if (!ok) throw WeightLayoutError(what + ": " + msg);
}

void check_dims(int64_t n, int64_t k, const std::string& what) {
  require(n > 0 && k > 0, what, "needs positive shape, got [" + std::to_string(n) + ", " + std::to_string(k) + "]");
}

// The fields every view has; the constructors below add their format's scales.
WeightView make_view(WeightLayout format, int64_t n, int64_t k, const void* data, int64_t ld) {
  WeightView w;
  w.format = format;
  w.n = n;
  w.k = k;
  w.data = data;
  w.ld = ld;
  return w;
}

}  // namespace

const char* weight_layout_name(WeightLayout f) {
  switch (f) {
    case WeightLayout::kBf16:
      return "bf16";
    case WeightLayout::kFp8Tensor:
      return "fp8-tensor";
    case WeightLayout::kFp8Block:
      return "fp8-block128";
    case WeightLayout::kNvfp4:
      return "nvfp4";
    case WeightLayout::kInt4Gptq:
      return "int4-gptq";
    case WeightLayout::kInt4Packed:
      return "int4-packed";
  }
  return "?";
}

WeightView bf16_weight(const uint16_t* data, int64_t n, int64_t k, const std::string& what) {
  check_dims(n, k, what);
  require(data != nullptr, what, "null data");
  return make_view(WeightLayout::kBf16, n, k, data, k);
}

WeightView fp8_tensor_weight(const uint8_t* data, float scale, int64_t n, int64_t k, const std::string& what) {
  check_dims(n, k, what);
  require(data != nullptr, what, "null data");
  require(scale > 0.0f, what, "weight_scale must be > 0");
  WeightView w = make_view(WeightLayout::kFp8Tensor, n, k, data, k);
  w.tensor_scale = scale;
  return w;
}

WeightView fp8_block_weight(const uint8_t* data, const void* scale_inv, bool scale_is_bf16, int64_t n,
                            int64_t k, const std::string& what) {
  check_dims(n, k, what);
  require(data != nullptr && scale_inv != nullptr, what, "null data or scale_inv");
  WeightView w = make_view(WeightLayout::kFp8Block, n, k, data, k);
  w.scales = scale_inv;
  w.scale_ld = (k + 127) / 128;
  w.scales_bf16 = scale_is_bf16;
  w.group = 128;
  return w;
}

WeightView nvfp4_weight(const uint8_t* packed, const uint8_t* block_scales, float global, int64_t n, int64_t k,
                        const std::string& what) {
  check_dims(n, k, what);
  require(k % 16 == 0, what, "NVFP4 needs K % 16 == 0, got K=" + std::to_string(k));
  require(packed != nullptr && block_scales != nullptr, what, "null packed data or block scales");
  require(global > 0.0f, what, "weight_scale_2 must be > 0");
  WeightView w = make_view(WeightLayout::kNvfp4, n, k, packed, k);
  w.scales = block_scales;
  w.scale_ld = k / 16;
  w.group = 16;
  w.tensor_scale = global;
  return w;
}

WeightView int4_gptq_weight(const int32_t* qweight, const uint16_t* scales_f16, int64_t n, int64_t k, int group,
                            const std::string& what) {
  check_dims(n, k, what);
  require(group > 0 && group % 8 == 0, what, "group size must be a positive multiple of 8");
  require(k % group == 0, what, "K=" + std::to_string(k) + " is not a multiple of the group size " +
                                    std::to_string(group));
  require(qweight != nullptr && scales_f16 != nullptr, what, "null qweight or scales");
  WeightView w = make_view(WeightLayout::kInt4Gptq, n, k, qweight, n);
  w.scales = scales_f16;
  w.scale_ld = n;
  w.group = group;
  return w;
}

std::vector<std::span<const std::byte>> weight_source_bytes(const WeightView& v) {
  auto span = [](const void* p, int64_t n) {
    return std::span<const std::byte>(static_cast<const std::byte*>(p), static_cast<size_t>(n));
  };
  switch (v.format) {
    case WeightLayout::kBf16: return {span(v.data, v.n * v.ld * 2)};
    case WeightLayout::kFp8Tensor: return {span(v.data, v.n * v.ld)};
    case WeightLayout::kFp8Block:
      return {span(v.data, v.n * v.ld), span(v.scales, (v.n + 127) / 128 * v.scale_ld * (v.scales_bf16 ? 2 : 4))};
    case WeightLayout::kNvfp4: return {span(v.data, v.n * v.ld / 2), span(v.scales, v.n * v.scale_ld)};
    default: return {};  // INT4: a column slice of the GPTQ layout is not one range (kept, as before)
  }
}

WeightView slice_rows(const WeightView& w, int64_t r0, int64_t rows) {
  const std::string what = std::string(weight_layout_name(w.format)) + " weight slice";
  require(r0 >= 0 && rows > 0 && r0 + rows <= w.n, what,
          "rows [" + std::to_string(r0) + ", " + std::to_string(r0 + rows) + ") outside [0, " +
              std::to_string(w.n) + ")");
  WeightView s = w;
  s.n = rows;
  s.packed = nullptr;
  switch (w.format) {
    case WeightLayout::kBf16:
      s.data = static_cast<const uint16_t*>(w.data) + r0 * w.ld;
      break;
    case WeightLayout::kFp8Tensor:
      s.data = static_cast<const uint8_t*>(w.data) + r0 * w.ld;
      break;
    case WeightLayout::kFp8Block:
      require(r0 % 128 == 0, what, "FP8 block weights can only be sliced at multiples of 128 rows");
      s.data = static_cast<const uint8_t*>(w.data) + r0 * w.ld;
      s.scales = w.scales_bf16
                     ? static_cast<const void*>(static_cast<const uint16_t*>(w.scales) + (r0 / 128) * w.scale_ld)
                     : static_cast<const void*>(static_cast<const float*>(w.scales) + (r0 / 128) * w.scale_ld);
      break;
    case WeightLayout::kNvfp4:
    case WeightLayout::kInt4Packed:
      s.data = static_cast<const uint8_t*>(w.data) + r0 * (w.ld / 2);
      if (w.format == WeightLayout::kNvfp4)
        s.scales = static_cast<const uint8_t*>(w.scales) + r0 * w.scale_ld;
      else
        s.scales = static_cast<const float*>(w.scales) + r0 * w.scale_ld;
      break;
    case WeightLayout::kInt4Gptq:  // rows of W are columns of qweight
      s.data = static_cast<const int32_t*>(w.data) + r0;
      s.scales = static_cast<const uint16_t*>(w.scales) + r0;
      break;
  }
  return s;
}

WeightView Int4Packed::view() const {
  WeightView w = make_view(WeightLayout::kInt4Packed, n, k, packed.data(), k);
  w.scales = scales.data();
  w.scale_ld = k / group;
  w.group = group;
  return w;
}

Int4Packed int4_repack(const WeightView& g) {
  if (g.format != WeightLayout::kInt4Gptq) throw WeightLayoutError("int4_repack: expects an int4-gptq view");
  Int4Packed p;
  p.n = g.n;
  p.k = g.k;
  p.group = g.group;
  p.packed.assign(static_cast<size_t>(g.n * g.k / 2), 0);
  p.scales.resize(static_cast<size_t>(g.n * (g.k / g.group)));
  const auto* qw = static_cast<const int32_t*>(g.data);
  const auto* sc = static_cast<const uint16_t*>(g.scales);
  for (int64_t kw = 0; kw < g.k / 8; ++kw) {
    for (int64_t n = 0; n < g.n; ++n) {
      const uint32_t word = static_cast<uint32_t>(qw[kw * g.ld + n]);
      uint8_t* dst = &p.packed[static_cast<size_t>(n * (g.k / 2) + kw * 4)];
      for (int j = 0; j < 4; ++j) dst[j] = static_cast<uint8_t>((word >> (8 * j)) & 0xFF);
    }
  }
  for (int64_t gi = 0; gi < g.k / g.group; ++gi)
    for (int64_t n = 0; n < g.n; ++n)
      p.scales[static_cast<size_t>(n * (g.k / g.group) + gi)] = f16_to_f32(sc[gi * g.scale_ld + n]);
  return p;
}

void dequantize_rows_unscaled(const WeightView& w, int64_t r0, int64_t r1, float* out) {
  float chunk[32];
  for (int64_t n = r0; n < r1; ++n) {
    float* row = out + (n - r0) * w.k;
    for (int64_t k0 = 0; k0 < w.k; k0 += 32) {
      cpu::dequant_chunk32(w, n, k0, chunk);
      for (int64_t j = 0; j < 32 && k0 + j < w.k; ++j) row[k0 + j] = chunk[j];
    }
  }
}

std::vector<float> dequantize_full(const WeightView& w) {
  std::vector<float> out(static_cast<size_t>(w.n * w.k));
  dequantize_rows_unscaled(w, 0, w.n, out.data());
  if (w.format == WeightLayout::kFp8Tensor || w.format == WeightLayout::kNvfp4)
    for (float& v : out) v *= w.tensor_scale;
  return out;
}

}  // namespace fp4serve::kernels
