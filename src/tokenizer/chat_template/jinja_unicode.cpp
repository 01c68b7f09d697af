#include "tokenizer/chat_template/jinja_unicode.h"

#include "tokenizer/utf8.h"

namespace fp4serve::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (c < 0x80) { cp = c; len = 1; }
    else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; len = 2; }
    else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; len = 3; }
    else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; len = 4; }
    else { out.push_back(0xFFFD); ++i; continue; }
    if (i + len > s.size()) { out.push_back(0xFFFD); ++i; continue; }
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) { ok = false; break; }
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) { out.push_back(0xFFFD); ++i; continue; }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) { tokenizer::utf8::append(out, cp); }

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8_append(out, cp);
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool py_isspace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool py_isprintable(char32_t cp) {
  if (cp == 0x20) return true;
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (py_isspace(cp)) return false;
  if ((cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F))
    return false;
  if (cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB)) return false;
  if (cp >= 0xD800 && cp <= 0xF8FF) return false;  // surrogates, private use
  if (cp >= 0xF0000) return false;                  // private use planes
  return true;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string u = utf8_decode(s);
  std::u32string set;
  if (chars) set = utf8_decode(*chars);
  auto strip_it = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : py_isspace(cp); };
  std::size_t b = 0, e = u.size();
  if (left) while (b < e && strip_it(u[b])) ++b;
  if (right) while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

}  // namespace fp4serve::jinja
