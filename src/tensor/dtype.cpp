#include "tensor/dtype.h"

#include <array>
#include <utility>

namespace fp4serve {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};

constexpr std::array<DTypeInfo, 16> kInfo{{
    {DType::kBool, "BOOL", 1, false},   {DType::kU8, "U8", 1, false},
    {DType::kI8, "I8", 1, false},       {DType::kU16, "U16", 2, false},
    {DType::kI16, "I16", 2, false},     {DType::kU32, "U32", 4, false},
    {DType::kI32, "I32", 4, false},     {DType::kU64, "U64", 8, false},
    {DType::kI64, "I64", 8, false},     {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},    {DType::kF32, "F32", 4, true},
    {DType::kF64, "F64", 8, true},      {DType::kF8E4M3, "F8_E4M3", 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, true}, {DType::kF8E8M0, "F8_E8M0", 1, true},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

}  // namespace fp4serve
