// Non-owning typed views of linear-layer weights W[N, K] (N = out features, K = in features,
// y = x @ W^T), one per checkpoint format. The kernels read these directly; owning storage lives
// in checkpoint/ and model/. Every view is a flat struct (no virtuals, no std::variant) so the ISA
// kernel files can take it by reference without instantiating templates.
//
// Dequantized value of element (n, k) -- the reference semantics each kernel reproduces:
//   kBf16          W = bf16(data[n*ld + k])
//   kFp8Tensor     W = e4m3(data[n*ld + k])                     ; y *= tensor_scale after the K sum
//   kFp8Block      W = e4m3(data[n*ld + k]) * scale[n/128][k/128]   (scale fp32 or bf16, per element)
//   kNvfp4         W = e2m1(nibble(n, k)) * e4m3(bscale[n][k/16])    ; y *= tensor_scale (weight_scale_2)
//                  nibble(n,k) = byte data[n*ld/2 + k/2], low nibble for even k (docs/quant-formats.md §1.2);
//                  e2m1 * e4m3 is exact in fp32, and weight_scale_2 goes on the fp32 sum
//                  (docs/quant-formats.md §5.1).
//   kInt4Gptq      W = (q - 8) * f16(scales[(k/group)*ld + n]),  q = (qweight[(k/8)*ld + n] >> 4*(k%8)) & 15
//                  (AutoRound/GPTQ sym, desc_act=false: g_idx is k/group and is ignored)
//   kInt4Packed    same numbers as kInt4Gptq after int4_repack(): nibbles row-major [N, K/2] like NVFP4,
//                  fp32 scales [N, K/group] -- the fast layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp4serve::kernels {

// How a weight's bytes lie in memory for the kernels. (A checkpoint's quantization scheme is
// tensor/weight_format.h's WeightFormat; one scheme can have several layouts: GPTQ INT4 is read as
// kInt4Gptq and repacked to kInt4Packed.)
enum class WeightLayout : uint8_t { kBf16, kFp8Tensor, kFp8Block, kNvfp4, kInt4Gptq, kInt4Packed };

struct PackedWeight;  // packed_weight.h: the same numbers in the fast tiers' panel layout

const char* weight_layout_name(WeightLayout f);

struct WeightView {
  WeightLayout format = WeightLayout::kBf16;
  int64_t n = 0;             // rows (out features)
  int64_t k = 0;             // cols (in features)
  const void* data = nullptr;
  int64_t ld = 0;            // elements between rows (kInt4Gptq: between K-word rows, i.e. total N)
  const void* scales = nullptr;
  int64_t scale_ld = 0;      // scale elements between scale rows
  bool scales_bf16 = false;  // kFp8Block only: scale_inv stored as bf16 instead of fp32
  int group = 0;             // kInt4*: K elements per scale (128); kNvfp4: 16; kFp8Block: 128
  float tensor_scale = 1.0f; // kFp8Tensor: weight_scale; kNvfp4: weight_scale_2; others 1
  // The same weight repacked into panels (set at load for the avx512_bf16 / amx tiers); tiers
  // without a panel kernel read `data` as above. Never owned by the view.
  const PackedWeight* packed = nullptr;
};

// Error for a view whose shapes or layout do not fit; the message names the weight.
struct WeightLayoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Constructors with checks (K multiples, non-null pointers). `what` names the tensor in errors.
WeightView bf16_weight(const uint16_t* data, int64_t n, int64_t k, const std::string& what = "bf16 weight");
WeightView fp8_tensor_weight(const uint8_t* data, float scale, int64_t n, int64_t k,
                             const std::string& what = "fp8 weight");
// scale_inv has ceil(n/128) rows of ceil(k/128) entries.
WeightView fp8_block_weight(const uint8_t* data, const void* scale_inv, bool scale_is_bf16, int64_t n,
                            int64_t k, const std::string& what = "fp8 block weight");
// packed [n, k/2], block_scales [n, k/16] e4m3, global = weight_scale_2. k % 16 == 0.
WeightView nvfp4_weight(const uint8_t* packed, const uint8_t* block_scales, float global, int64_t n,
                        int64_t k, const std::string& what = "nvfp4 weight");
// qweight int32 [k/8, n], scales f16 [k/group, n]. k % group == 0, group % 8 == 0.
WeightView int4_gptq_weight(const int32_t* qweight, const uint16_t* scales_f16, int64_t n, int64_t k,
                            int group = 128, const std::string& what = "int4 weight");

// Rows [r0, r0 + rows) of a view, as a view (for fused tensors: gate/up halves, per-expert slices
// of a [E*N, K] stack). kFp8Block needs r0 % 128 == 0. The slice has no packed form (pack slices
// separately).
WeightView slice_rows(const WeightView& w, int64_t r0, int64_t rows);

// Owning repacked INT4 weight (the fast CPU layout); view() is a kInt4Packed view.
struct Int4Packed {
  int64_t n = 0, k = 0;
  int group = 128;
  std::vector<uint8_t> packed;  // [n, k/2], low nibble = even k, nibble = q (0..15, zero point 8)
  std::vector<float> scales;    // [n, k/group]
  WeightView view() const;
};
Int4Packed int4_repack(const WeightView& gptq);

// The host bytes a view reads (its data and, for the scaled formats, its scales): what a backend that
// copied the weight can release.
std::vector<std::span<const std::byte>> weight_source_bytes(const WeightView& w);

// Reference dequantization of rows [r0, r1) to fp32 [rows, k] (the semantics above; tests and
// slow paths use it). For kFp8Tensor and kNvfp4 the tensor_scale is NOT applied (it belongs to the
// accumulator); use dequantize_full for the plain dense matrix.
void dequantize_rows_unscaled(const WeightView& w, int64_t r0, int64_t r1, float* out);
// Plain dense W (tensor_scale applied per element, in fp32).
std::vector<float> dequantize_full(const WeightView& w);

}  // namespace fp4serve::kernels
