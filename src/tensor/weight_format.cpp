#include "tensor/weight_format.h"

namespace fp4serve {

std::string_view weight_format_kind_name(WeightFormatKind kind) {
  switch (kind) {
    case WeightFormatKind::kBF16: return "bf16";
    case WeightFormatKind::kFP8PerTensor: return "fp8";
    case WeightFormatKind::kFP8Block: return "fp8_block";
    case WeightFormatKind::kNVFP4: return "nvfp4";
    case WeightFormatKind::kInt4Gptq: return "int4_gptq";
  }
  return "unknown";
}

std::string WeightFormat::name() const {
  std::string out(weight_format_kind_name(kind));
  switch (kind) {
    case WeightFormatKind::kBF16:
      break;
    case WeightFormatKind::kFP8PerTensor:
      if (!activations_quantized) out += "_w8a16";
      else if (!activations_static) out += "_dynamic";
      break;
    case WeightFormatKind::kFP8Block:
      out += "_" + std::to_string(block_rows) + "x" + std::to_string(block_cols);
      break;
    case WeightFormatKind::kNVFP4:
      out += activations_quantized ? "_w4a4" : "_w4a16";
      out += "_g" + std::to_string(group_size);
      break;
    case WeightFormatKind::kInt4Gptq:
      out += group_size < 0 ? std::string("_per_channel") : "_g" + std::to_string(group_size);
      out += sym ? "_sym" : "_asym";
      if (desc_act) out += "_actorder";
      if (!sym) out += zero_convention == Int4ZeroConvention::kV2 ? "_zv2" : "_zv1";
      break;
  }
  return out;
}

WeightFormat WeightFormat::fp8_per_tensor(bool static_activation_scale) {
  WeightFormat f;
  f.kind = WeightFormatKind::kFP8PerTensor;
  f.bits = 8;
  f.activations_quantized = true;
  f.activations_static = static_activation_scale;
  return f;
}

WeightFormat WeightFormat::fp8_block(int block_rows, int block_cols) {
  WeightFormat f;
  f.kind = WeightFormatKind::kFP8Block;
  f.bits = 8;
  f.block_rows = block_rows;
  f.block_cols = block_cols;
  f.activations_quantized = true;  // per-token-group dynamic, as vLLM's block-FP8 path
  return f;
}

WeightFormat WeightFormat::nvfp4(int group_size, bool w4a4) {
  WeightFormat f;
  f.kind = WeightFormatKind::kNVFP4;
  f.bits = 4;
  f.group_size = group_size;
  f.activations_quantized = w4a4;
  f.activations_static = w4a4;  // W4A4 uses the checkpoint's input_scale as its global scale
  return f;
}

WeightFormat WeightFormat::int4_gptq(int group_size, bool sym, bool desc_act, Int4ZeroConvention zeros) {
  WeightFormat f;
  f.kind = WeightFormatKind::kInt4Gptq;
  f.bits = 4;
  f.group_size = group_size;
  f.sym = sym;
  f.desc_act = desc_act;
  f.zero_convention = zeros;
  return f;
}

}  // namespace fp4serve
