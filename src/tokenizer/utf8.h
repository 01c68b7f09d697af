#pragma once
// UTF-8 helpers shared by the tokenizer: decoding, encoding, and the lossy repair that Hugging Face
// applies to invalid byte sequences (Rust's String::from_utf8_lossy).
#include <cstddef>
#include <string>
#include <string_view>

namespace fp4serve::tokenizer::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;

// Length in bytes of the valid UTF-8 sequence at s[pos], or 0 if the bytes there are not one
// (overlong forms, surrogates, > U+10FFFF and truncated sequences are all invalid).
std::size_t valid_sequence_length(std::string_view s, std::size_t pos);

// Decodes the code point at s[pos] (which must start a valid sequence) and advances pos.
char32_t decode(std::string_view s, std::size_t& pos);

void append(std::string& out, char32_t cp);

bool is_valid(std::string_view s);

// Replaces every maximal invalid subpart with U+FFFD, exactly as Rust's String::from_utf8_lossy
// (and therefore HF's ByteLevel decoder) does. Valid input is returned unchanged.
std::string to_valid_lossy(std::string_view s);

// True when s ends with U+FFFD (what HF's DecodeStream checks to hold back partial characters).
bool ends_with_replacement(std::string_view s);

}  // namespace fp4serve::tokenizer::utf8
