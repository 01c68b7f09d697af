#pragma once
// Unicode tables for NFC, generated into unicode_nfc_data.cpp by tools/reference/gen_nfc_tables.py.
#include <cstddef>
#include <cstdint>

namespace fp4serve::tokenizer::nfc_data {

struct Decomposition {
  std::uint32_t code_point;
  std::uint32_t offset;  // into kDecompositionPool; the full (recursive) canonical decomposition
  std::uint32_t length;
};
struct CombiningClassRange {
  std::uint32_t first, last;
  std::uint8_t combining_class;
};
struct Composition {
  std::uint64_t pair;  // (first << 21) | second
  std::uint32_t composite;
};

extern const std::uint32_t kDecompositionPool[];
extern const Decomposition kDecompositions[];  // sorted by code_point, Hangul syllables excluded
extern const std::size_t kDecompositionCount;
extern const CombiningClassRange kCombiningClasses[];  // sorted, non-zero classes only
extern const std::size_t kCombiningClassCount;
extern const Composition kCompositions[];  // sorted by pair; primary composites only
extern const std::size_t kCompositionCount;

}  // namespace fp4serve::tokenizer::nfc_data
