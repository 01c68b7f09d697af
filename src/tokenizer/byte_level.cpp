#include "tokenizer/byte_level.h"

#include <vector>

#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_char;
  std::vector<int> char_to_byte;  // indexed by code point < 0x200, -1 when not a byte char

  Tables() : char_to_byte(0x200, -1) {
    // Printable Latin-1 bytes map to themselves; the other 68 bytes to U+0100 + n in byte order.
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? char32_t(b) : char32_t(256 + next++);
      utf8::append(byte_to_char[b], cp);
      char_to_byte[cp] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& char_for_byte(unsigned char b) { return tables().byte_to_char[b]; }

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_char[static_cast<unsigned char>(c)];
  return out;
}

bool decode(std::string_view token, std::string& out) {
  const Tables& t = tables();
  out.clear();
  std::size_t pos = 0;
  while (pos < token.size()) {
    if (utf8::valid_sequence_length(token, pos) == 0) return false;
    const char32_t cp = utf8::decode(token, pos);
    if (cp >= t.char_to_byte.size() || t.char_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(t.char_to_byte[cp]));
  }
  return true;
}

std::string decode_token(std::string_view token) {
  std::string out;
  if (!decode(token, out)) out.assign(token);
  return out;
}

}  // namespace fp4serve::tokenizer::byte_level
