// Structure-aware mutation of JSON inputs for libFuzzer's LLVMFuzzerCustomMutator /
// LLVMFuzzerCustomCrossOver: the input is parsed, one node of the tree is changed the way a hostile
// or sloppy client would change a request (a value of another type, numbers at the edges, odd
// strings, known field names inserted, keys deleted or duplicated, values wrapped in arrays, subtrees
// copied around), and the tree is written back. Inputs that are not JSON fall back to libFuzzer's
// byte mutation, and a small share of JSON inputs gets byte-mutated too, so malformed bodies stay
// covered.
//
// The writer can emit what a JSON library would never produce: raw number literals (1e309, NaN,
// 2^64), duplicate keys, lone-surrogate escapes and invalid UTF-8 inside strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4serve::fuzz {

// What the mutator knows about the inputs: field names with a typical value each (JSON text), per
// nesting level, so that inserted fields are ones the parser reads.
struct JsonVocabulary {
  std::vector<std::pair<std::string, std::string>> top_level_fields;  // (name, example value JSON)
  std::vector<std::pair<std::string, std::string>> nested_fields;     // keys of nested objects
  std::vector<std::string> strings;                                   // interesting string values
};

// Nesting depth of JSON text (brackets outside strings), without parsing it.
int json_text_depth(std::string_view text);

// One structured mutation in place; returns the new size (<= max_size).
std::size_t mutate_json(uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                        const JsonVocabulary& vocabulary);

// Grafts a random subtree of `b` into a random place of `a`; byte crossover when either is not JSON.
std::size_t crossover_json(const uint8_t* a, std::size_t size_a, const uint8_t* b, std::size_t size_b,
                           uint8_t* out, std::size_t max_out, unsigned seed);

}  // namespace fp4serve::fuzz

// libFuzzer's custom mutator and crossover hooks of a JSON-structured target, over its vocabulary
// (an expression giving the target's std::vector<std::string>-like word list).
#define FP4SERVE_FUZZ_JSON_MUTATOR(vocabulary_expr)                                                          \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) { \
    return ::fp4serve::fuzz::mutate_json(data, size, max_size, seed, (vocabulary_expr));                     \
  }                                                                                                          \
  extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t size_a, const uint8_t* b,             \
                                              size_t size_b, uint8_t* out, size_t max_out, unsigned int seed) { \
    return ::fp4serve::fuzz::crossover_json(a, size_a, b, size_b, out, max_out, seed);                       \
  }
