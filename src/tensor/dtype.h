// Storage element types of tensors as they appear in safetensors files, and their sizes.
// Quantization schemes built from several tensors (NVFP4, INT4 groups, block FP8) are described by
// WeightFormat in weight_format.h; a DType is only what one tensor's bytes are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fp4serve {

enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,  // float8_e4m3fn: no Inf, NaN only at 0x7F/0xFF, max 448
  kF8E5M2,  // float8_e5m2: IEEE-like, Inf and NaN, max 57344
  kF8E8M0,  // exponent-only scale format (MX); accepted by the reader, unused by the model
};

// Bytes per element (all storage types here are whole bytes).
size_t dtype_size(DType t);

// Safetensors spelling ("BF16", "F8_E4M3", ...). from_safetensors returns nullopt for unknown names.
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_safetensors(std::string_view name);

bool dtype_is_float(DType t);

}  // namespace fp4serve
