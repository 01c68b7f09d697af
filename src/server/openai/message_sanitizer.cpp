#include "server/openai/message_sanitizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <memory>
#include <stdexcept>

namespace fp4serve::server::openai {

namespace {

// One compiled pattern and its replace-all. Compiled once (static), matched from any thread: the
// match data and context are per call.
class Pattern {
 public:
  explicit Pattern(const char* pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!code_) throw std::logic_error(std::string("bad sanitizer pattern: ") + pattern);
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
  }
  ~Pattern() { pcre2_code_free(code_); }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // Replaces every match. On a PCRE2 failure (match limit) the text is returned unchanged.
  std::string replace_all(const std::string& text, std::string_view replacement) const {
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
        pcre2_match_context_create(nullptr), &pcre2_match_context_free);
    if (!context) return text;
    pcre2_set_match_limit(context.get(), 1'000'000);
    std::string out(text.size() + 64, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
      PCRE2_SIZE out_len = out.size();
      const int rc = pcre2_substitute(
          code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
          PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
          nullptr, context.get(), reinterpret_cast<PCRE2_SPTR>(replacement.data()), replacement.size(),
          reinterpret_cast<PCRE2_UCHAR*>(out.data()), &out_len);
      if (rc >= 0) {
        out.resize(out_len);
        return out;
      }
      if (rc != PCRE2_ERROR_NOMEMORY) return text;
      out.assign(out_len, '\0');  // OVERFLOW_LENGTH: out_len is the size needed
    }
    return text;
  }

 private:
  pcre2_code* code_ = nullptr;
};

std::size_t prefix_bytes(std::string_view text, std::size_t max_chars, bool* cut) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
      if (count == max_chars) {
        *cut = true;
        return i;
      }
      ++count;
    }
  }
  *cut = false;
  return text.size();
}

std::string strip(const std::string& text) {
  const auto b = text.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  const auto e = text.find_last_not_of(" \t\n\r\f\v");
  return text.substr(b, e - b + 1);
}

}  // namespace

std::string echo_input(std::string_view text, std::size_t max_chars) {
  bool cut = false;
  std::string out(text.substr(0, prefix_bytes(text, max_chars, &cut)));
  if (cut) out += kTruncationMarker;
  return out;
}

std::string sanitize_message(const std::string& message) {
  static const Pattern kAddress(" at 0x[0-9a-f]+>");
  static const Pattern kTraceback("\\n?\\s*File \"[^\"]+\", line \\d+, in \\S+(\\n\\s+.*)?");
  static const Pattern kSystemPath("/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\\w.\\-]+)+");
  static const Pattern kFilePath("(?:/[\\w\\-]+)+/[\\w\\-]+\\.\\w+");
  std::string out = echo_input(message, kMaxErrorMessageChars);
  out = kAddress.replace_all(out, ">");
  out = kTraceback.replace_all(out, "");
  out = kSystemPath.replace_all(out, "<path>");
  out = kFilePath.replace_all(out, "<path>");
  return strip(out);
}

}  // namespace fp4serve::server::openai
