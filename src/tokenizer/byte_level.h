#pragma once
// GPT-2's reversible byte <-> printable-character map used by byte-level BPE vocabularies:
// the token "Ġhello" is the bytes " hello". We run BPE on raw bytes and use this map only to
// translate the vocabulary once at load time and to decode.
#include <array>
#include <string>
#include <string_view>

namespace fp4serve::tokenizer::byte_level {

// The character (as UTF-8) that stands for byte b.
const std::string& char_for_byte(unsigned char b);

// Bytes -> byte-level string ("\n" -> "Ċ").
std::string encode(std::string_view bytes);

// Byte-level string -> bytes. Returns false (out unspecified) when some character of token is not
// in the map; HF's ByteLevel decoder then uses the token's own UTF-8 bytes, as does decode_token.
bool decode(std::string_view token, std::string& out);

// What HF's ByteLevel decoder emits for one token before the final UTF-8 repair.
std::string decode_token(std::string_view token);

}  // namespace fp4serve::tokenizer::byte_level
