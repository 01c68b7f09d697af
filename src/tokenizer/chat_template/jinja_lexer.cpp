#include "tokenizer/chat_template/jinja_lexer.h"

#include <algorithm>

#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {

SourceMap::SourceMap(const std::string& source) : source_(&source) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < source.size(); ++i)
    if (source[i] == '\n') line_starts_.push_back(i + 1);
}

SourcePos SourceMap::pos(std::size_t offset) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
  const std::size_t start = line_starts_[line - 1];
  const std::size_t end = std::min(offset, source_->size());
  return {line, utf8_length(std::string_view(*source_).substr(start, end - start)) + 1};
}

std::string normalize_template_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

namespace {

// Length of the run of Python whitespace (\s) starting at pos.
std::size_t whitespace_run(const std::string& s, std::size_t pos) {
  std::size_t i = pos;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (!py_isspace(c)) break;
      ++i;
      continue;
    }
    std::size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + len > s.size()) break;
    const std::u32string cp = utf8_decode(std::string_view(s).substr(i, len));
    if (cp.size() != 1 || !py_isspace(cp[0])) break;
    i += len;
  }
  return i - pos;
}

bool starts_with(const std::string& s, std::size_t pos, const char* lit) {
  return s.compare(pos, std::char_traits<char>::length(lit), lit) == 0;
}

class Lexer {
 public:
  Lexer(const std::string& src, const SourceMap& map) : src_(src), map_(map) {}

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const std::size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit(TokenType::Data, src_.substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = 0;
      if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) sign = src_[tag + 2];
      std::string text = src_.substr(pos, tag - pos);
      std::size_t raw_end = 0;
      const bool is_raw = kind == '%' && match_raw_begin(tag, &raw_end);
      apply_lstrip(text, sign, kind != '{', line_starting);
      if (!text.empty()) emit(TokenType::Data, std::move(text), pos);
      std::size_t body = tag + 2 + (sign ? 1 : 0);
      if (is_raw) {
        pos = lex_raw(raw_end, &line_starting);
      } else if (kind == '#') {
        pos = lex_comment(tag, body, &line_starting);
      } else {
        pos = lex_tag(kind == '%', tag, body, &line_starting);
      }
    }
    tokens_.push_back({TokenType::Eof, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, std::size_t offset) const {
    throw TemplateSyntaxError(msg, map_.pos(offset));
  }

  void emit(TokenType t, std::string text, std::size_t offset) { tokens_.push_back({t, std::move(text), offset}); }

  std::size_t find_tag(std::size_t pos) const {
    while (true) {
      const std::size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      const char n = src_[p + 1];
      if (n == '{' || n == '%' || n == '#') return p;
      pos = p + 1;
    }
  }

  // OptionalLStrip: `-` strips all whitespace before the tag; otherwise lstrip_blocks strips the
  // spaces/tabs between the last newline and a block/comment tag.
  void apply_lstrip(std::string& text, char sign, bool block_or_comment, bool line_starting) const {
    if (sign == '-') {
      text = py_strip(text, nullptr, false, true);
    } else if (sign != '+' && block_or_comment) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          whitespace_run(text, l_pos) == text.size() - l_pos)
        text.resize(l_pos);
    }
  }

  // {%(-|+|)\s*raw\s*(?:-%}\s*|%})  -- note: no trim_blocks newline after a raw start tag.
  bool match_raw_begin(std::size_t tag, std::size_t* end) const {
    std::size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p += whitespace_run(src_, p);
    if (!starts_with(src_, p, "raw")) return false;
    p += 3;
    p += whitespace_run(src_, p);
    if (starts_with(src_, p, "-%}")) {
      p += 3;
      p += whitespace_run(src_, p);
    } else if (starts_with(src_, p, "%}")) {
      p += 2;
    } else {
      return false;
    }
    *end = p;
    return true;
  }

  std::size_t lex_raw(std::size_t pos, bool* line_starting) {
    std::size_t search = pos;
    while (true) {
      const std::size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) fail("Missing end of raw directive", pos);
      std::size_t p = tag + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p += whitespace_run(src_, p);
      if (!starts_with(src_, p, "endraw")) {
        search = tag + 2;
        continue;
      }
      p += 6;
      p += whitespace_run(src_, p);
      std::size_t end = 0;
      if (!match_block_end(p, &end)) {
        search = tag + 2;
        continue;
      }
      std::string text = src_.substr(pos, tag - pos);
      apply_lstrip(text, sign, true, false);
      if (!text.empty()) emit(TokenType::Data, std::move(text), pos);
      *line_starting = src_[end - 1] == '\n';
      return end;
    }
  }

  // +%} | -%}\s* | %}\n?
  bool match_block_end(std::size_t p, std::size_t* end) const {
    if (starts_with(src_, p, "+%}")) {
      *end = p + 3;
    } else if (starts_with(src_, p, "-%}")) {
      *end = p + 3 + whitespace_run(src_, p + 3);
    } else if (starts_with(src_, p, "%}")) {
      *end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
    } else {
      return false;
    }
    return true;
  }

  std::size_t lex_comment(std::size_t tag, std::size_t body, bool* line_starting) {
    for (std::size_t p = body; p < src_.size(); ++p) {
      std::size_t end = 0;
      if (starts_with(src_, p, "+#}")) end = p + 3;
      else if (starts_with(src_, p, "-#}")) end = p + 3 + whitespace_run(src_, p + 3);
      else if (starts_with(src_, p, "#}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
      else continue;
      *line_starting = src_[end - 1] == '\n';
      return end;
    }
    fail("Missing end of comment tag", tag);
  }

  std::size_t lex_tag(bool block, std::size_t tag, std::size_t pos, bool* line_starting) {
    emit(block ? TokenType::BlockBegin : TokenType::VarBegin, block ? "{%" : "{{", tag);
    std::vector<char> balance;
    while (true) {
      if (pos >= src_.size()) fail(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'", tag);
      if (balance.empty()) {
        std::size_t end = 0;
        bool matched = false;
        if (block) {
          matched = match_block_end(pos, &end);
        } else if (starts_with(src_, pos, "-}}")) {
          end = pos + 3 + whitespace_run(src_, pos + 3);
          matched = true;
        } else if (starts_with(src_, pos, "}}")) {
          end = pos + 2;
          matched = true;
        }
        if (matched) {
          emit(block ? TokenType::BlockEnd : TokenType::VarEnd, "", pos);
          *line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      const std::size_t ws = whitespace_run(src_, pos);
      if (ws) {
        pos += ws;
        continue;
      }
      pos = lex_expression_token(pos, balance);
    }
  }

  std::size_t lex_expression_token(std::size_t pos, std::vector<char>& balance) {
    const char c = src_[pos];
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(pos);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t e = pos;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      emit(TokenType::Name, src_.substr(pos, e - pos), pos);
      return e;
    }
    if (c == '\'' || c == '"') return lex_string(pos);
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (starts_with(src_, pos, op)) {
        emit(TokenType::Operator, op, pos);
        return pos + 2;
      }
    }
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos) fail(std::string("unexpected char '") + c + "'", pos);
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(std::string("unexpected '") + c + "'", pos);
      if (balance.back() != c) fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", pos);
      balance.pop_back();
    }
    emit(TokenType::Operator, std::string(1, c), pos);
    return pos + 1;
  }

  std::size_t digits(std::size_t p) const {
    // (\d+_)*\d+
    std::size_t e = p;
    while (e < src_.size()) {
      if (std::isdigit(static_cast<unsigned char>(src_[e]))) {
        ++e;
      } else if (src_[e] == '_' && e > p && e + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
        ++e;
      } else {
        break;
      }
    }
    return e;
  }

  std::size_t lex_number(std::size_t pos) {
    std::size_t e = digits(pos);
    bool is_float = false;
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    if (!after_dot) {
      if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
        e = digits(e + 1);
        is_float = true;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        std::size_t p = e + 1;
        if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
        if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
          e = digits(p);
          is_float = true;
        }
      }
    }
    std::string text;
    for (std::size_t i = pos; i < e; ++i)
      if (src_[i] != '_') text.push_back(src_[i]);
    emit(is_float ? TokenType::Float : TokenType::Integer, text, pos);
    return e;
  }

  std::size_t lex_string(std::size_t pos) {
    const char quote = src_[pos];
    std::size_t e = pos + 1;
    while (e < src_.size() && src_[e] != quote) {
      if (src_[e] == '\\') ++e;
      ++e;
    }
    if (e >= src_.size()) fail("unexpected char '" + std::string(1, quote) + "' (unterminated string)", pos);
    emit(TokenType::String, decode_escapes(src_.substr(pos + 1, e - pos - 1), pos), pos);
    return e + 1;
  }

  // Python's "unicode-escape" decoding, which is what jinja2 applies to string literals.
  std::string decode_escapes(const std::string& s, std::size_t offset) const {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out.push_back(s[i]);
        continue;
      }
      const char c = s[++i];
      auto hex = [&](int n) -> char32_t {
        if (i + n >= s.size()) fail("truncated \\x/\\u escape in string", offset);
        char32_t v = 0;
        for (int k = 0; k < n; ++k) {
          const char h = s[i + 1 + k];
          if (!std::isxdigit(static_cast<unsigned char>(h))) fail("truncated \\x/\\u escape in string", offset);
          v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        i += n;
        return v;
      };
      switch (c) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
          utf8_append(out, hex(2));
          break;
        case 'u':
          utf8_append(out, hex(4));
          break;
        case 'U':
          utf8_append(out, hex(8));
          break;
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
              v = v * 8 + static_cast<char32_t>(s[++i] - '0');
            utf8_append(out, v);
          } else {
            out.push_back('\\');
            out.push_back(c);
          }
      }
    }
    return out;
  }

  const std::string& src_;
  const SourceMap& map_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(const std::string& source, const SourceMap& map) {
  return Lexer(source, map).run();
}

}  // namespace fp4serve::jinja
