// How one linear module's weight is stored and computed: the quantization scheme built from several
// tensors (a DType in dtype.h is only what one tensor's bytes are). checkpoint/quant_config.h decides
// the format of each module from the checkpoint's configs; the loader and the kernels consume it.
//
//   kBF16         unquantized; `weight` in whatever float dtype is on disk (bf16, f16, f32).
//   kFP8PerTensor ModelOpt "FP8": `weight` e4m3 [N,K], `weight_scale` f32 scalar, and a static
//                 activation scale `input_scale` (activations_quantized) — docs/quant-formats.md §3.2.
//                 Also plain quant_method "fp8" without a block size (dynamic activations).
//   kFP8Block     Qwen/DeepSeek block FP8: `weight` e4m3 [N,K], `weight_scale_inv` per
//                 block_rows x block_cols block, activations quantized dynamically (fp8_block.h).
//   kNVFP4        ModelOpt NVFP4: packed e2m1 + e4m3 block scales per group_size (16) + fp32
//                 `weight_scale_2`; activations_quantized tells NVFP4 (W4A4, needs `input_scale`)
//                 from W4A16_NVFP4 (any `input_scale` on disk is ignored) — nvfp4.h,
//                 docs/quant-formats.md §1.3-1.4.
//   kInt4Gptq     GPTQ / AutoRound auto_gptq packing: int32 `qweight`, f16 `scales`, `qzeros` per
//                 group_size (-1 = one group per column), sym/desc_act (`g_idx`) — int4_gptq.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp4serve {

enum class WeightFormatKind : uint8_t {
  kBF16,
  kFP8PerTensor,
  kFP8Block,
  kNVFP4,
  kInt4Gptq,
};

// How `qzeros` of an INT4 GPTQ checkpoint are written. auto_gptq's original ("v1") format stores
// zero-1; GPTQModel's "gptq_v2" stores the zero itself. Symmetric checkpoints never need qzeros
// (the zero is 8), so this matters only for sym=false.
enum class Int4ZeroConvention : uint8_t { kV1MinusOne, kV2 };

struct WeightFormat {
  WeightFormatKind kind = WeightFormatKind::kBF16;
  int bits = 16;                       // 16 (bf16), 8 (fp8), 4 (nvfp4, int4)
  int group_size = 0;                  // NVFP4: 16; INT4: 32/64/128 or -1 (per column); else 0
  int block_rows = 0;                  // kFP8Block only (e.g. 128)
  int block_cols = 0;                  // kFP8Block only (e.g. 128)
  bool activations_quantized = false;  // W8A8 FP8, W4A4 NVFP4, dynamic block FP8
  bool activations_static = false;     // the activation scale is a checkpoint tensor (input_scale)
  bool sym = true;                     // kInt4Gptq
  bool desc_act = false;               // kInt4Gptq: act-order, rows permuted by g_idx
  Int4ZeroConvention zero_convention = Int4ZeroConvention::kV1MinusOne;  // kInt4Gptq

  bool is_quantized() const { return kind != WeightFormatKind::kBF16; }

  // A short stable name for logs and `fp4serve inspect`: "bf16", "fp8", "fp8_block_128x128",
  // "nvfp4_w4a4_g16", "nvfp4_w4a16_g16", "int4_gptq_g128_sym", "int4_gptq_g128_asym_actorder".
  std::string name() const;

  friend bool operator==(const WeightFormat&, const WeightFormat&) = default;

  static WeightFormat bf16() { return {}; }
  static WeightFormat fp8_per_tensor(bool static_activation_scale);
  static WeightFormat fp8_block(int block_rows, int block_cols);
  static WeightFormat nvfp4(int group_size, bool w4a4);
  static WeightFormat int4_gptq(int group_size, bool sym, bool desc_act, Int4ZeroConvention zeros);
};

std::string_view weight_format_kind_name(WeightFormatKind kind);

}  // namespace fp4serve
