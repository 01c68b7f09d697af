#include "server/openai/tool_parser_python_literal.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "server/openai/tool_parser_values.h"

#include "server/openai/python_text.h"

namespace fp4serve::server::openai {
namespace {

using json = nlohmann::ordered_json;

std::string_view strip(std::string_view s) { return py_strip(s); }

std::string lower(std::string_view s) { return py_lower(s); }

// Digits with single underscores between them (Python numeric literal rule); appends the digits.
bool take_digits(std::string_view s, std::size_t& i, std::string& out) {
  const std::size_t start = i;
  while (i < s.size()) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      out += s[i++];
    } else if (s[i] == '_' && i > start && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isdigit(static_cast<unsigned char>(s[i - 1]))) {
      ++i;
    } else {
      break;
    }
  }
  return i > start;
}

// ---- ast.literal_eval -------------------------------------------------------------------------

class LiteralParser {
 public:
  explicit LiteralParser(std::string_view text) : s_(text) {}
  static constexpr int kMaxNesting = 200;

  std::optional<json> parse_all() {
    skip_ws();
    auto v = value();
    if (!v) return std::nullopt;
    skip_ws();
    if (i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip_ws() {
    while (i_ < s_.size()) {
      if (is_py_space(s_[i_])) {
        ++i_;
      } else if (s_[i_] == '#') {  // a comment runs to the end of the line
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  std::optional<json> value() {
    // The text is model output: nesting is bounded like CPython's parser, which refuses more than
    // 200 nested brackets ("too many nested parentheses"); a refusal keeps the text as a string.
    if (depth_ >= kMaxNesting) return std::nullopt;
    ++depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    skip_ws();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (c == '[') return sequence('[', ']');
    if (c == '(') return sequence('(', ')');
    if (c == '{') return mapping();
    if (c == '\'' || c == '"') return strings();
    if (c == '+' || c == '-') {
      ++i_;
      auto v = value();
      if (!v || !v->is_number()) return std::nullopt;
      if (c == '+') return v;
      if (v->is_number_float()) return json(-v->get<double>());
      if (v->is_number_unsigned()) {
        const auto u = v->get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1) return json(-static_cast<double>(u));
        return json(static_cast<std::int64_t>(0 - u));
      }
      return json(-v->get<std::int64_t>());
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      const std::string_view word = s_.substr(start, i_ - start);
      if (word == "True") return json(true);
      if (word == "False") return json(false);
      if (word == "None") return json(nullptr);
      return std::nullopt;  // a name: ValueError("malformed node")
    }
    return std::nullopt;
  }

  std::optional<json> sequence(char open, char close) {
    ++i_;
    json arr = json::array();
    bool saw_comma = false;
    if (eat(close)) return arr;
    while (true) {
      auto v = value();
      if (!v) return std::nullopt;
      arr.push_back(std::move(*v));
      if (eat(close)) break;
      if (!eat(',')) return std::nullopt;
      saw_comma = true;
      if (eat(close)) break;
    }
    // "(x)" is just x in parentheses, "(x,)" a tuple.
    if (open == '(' && arr.size() == 1 && !saw_comma) return arr[0];
    return arr;
  }

  std::optional<json> mapping() {
    ++i_;
    json obj = json::object();
    if (eat('}')) return obj;
    bool is_set = false;
    bool first = true;
    while (true) {
      auto key = value();
      if (!key) return std::nullopt;
      if (first) {
        is_set = !eat(':');
        if (!is_set) {
          first = false;
          auto v = value();
          if (!v) return std::nullopt;
          obj[key_string(*key)] = std::move(*v);
        }
      } else if (is_set) {
        // more set items
      } else {
        if (!eat(':')) return std::nullopt;
        auto v = value();
        if (!v) return std::nullopt;
        obj[key_string(*key)] = std::move(*v);
      }
      first = false;
      if (eat('}')) break;
      if (!eat(',')) return std::nullopt;
      if (eat('}')) break;
    }
    if (is_set) throw ToolCallExtractionAborted("a Python set is not JSON serializable");
    return obj;
  }

  // json.dumps turns dict keys into strings: str keys as is, True -> "true", None -> "null",
  // numbers by their repr. Lists/dicts as keys are unhashable (ValueError in literal_eval).
  std::string key_string(const json& key) {
    if (key.is_string()) return key.get<std::string>();
    if (key.is_boolean()) return key.get<bool>() ? "true" : "false";
    if (key.is_null()) return "null";
    if (key.is_number()) return python_json_dumps(key);
    throw ToolCallExtractionAborted("unhashable dict key");
  }

  std::optional<json> strings() {
    std::string out;
    bool any = false;
    while (true) {
      skip_ws();
      if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) break;
      if (!one_string(out)) return std::nullopt;
      any = true;
    }
    if (!any) return std::nullopt;
    return json(out);
  }

  bool one_string(std::string& out) {
    const char q = s_[i_];
    const bool triple = s_.substr(i_, 3) == std::string(3, q);
    i_ += triple ? 3 : 1;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (triple ? s_.substr(i_, 3) == std::string(3, q) : c == q) {
        i_ += triple ? 3 : 1;
        return true;
      }
      if (c == '\n' && !triple) return false;
      if (c == '\\' && i_ + 1 < s_.size()) {
        const char e = s_[i_ + 1];
        i_ += 2;
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '\\': out += '\\'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\n': break;  // line continuation
          case '0': out += '\0'; break;
          case 'a': out += '\a'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case 'x':
          case 'u':
          case 'U': {
            const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (i_ + n > s_.size()) return false;
            unsigned long cp = 0;
            for (std::size_t k = 0; k < n; ++k) {
              const char h = s_[i_ + k];
              if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
              cp = cp * 16 + static_cast<unsigned long>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
            }
            i_ += n;
            append_utf8(cp, out);
            break;
          }
          default: out += '\\'; out += e; break;  // unknown escapes stay as written
        }
        continue;
      }
      out += c;
      ++i_;
    }
    return false;
  }

  static void append_utf8(unsigned long cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::optional<json> number() {
    // Hex / octal / binary integers.
    if (s_[i_] == '0' && i_ + 1 < s_.size() && std::strchr("xXoObB", s_[i_ + 1]) != nullptr) {
      const char kind = static_cast<char>(std::tolower(s_[i_ + 1]));
      const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      i_ += 2;
      std::string digits;
      while (i_ < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) {
        if (s_[i_] != '_') digits += s_[i_];
        ++i_;
      }
      if (digits.empty()) return std::nullopt;
      errno = 0;
      char* end = nullptr;
      const unsigned long long v = std::strtoull(digits.c_str(), &end, base);
      if (errno != 0 || *end != '\0') return std::nullopt;
      return json(static_cast<std::uint64_t>(v));
    }
    std::string text;
    bool is_float = false;
    take_digits(s_, i_, text);
    if (i_ < s_.size() && s_[i_] == '.') {
      is_float = true;
      text += s_[i_++];
      take_digits(s_, i_, text);
    }
    if (text.empty() || text == ".") return std::nullopt;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      std::size_t j = i_ + 1;
      std::string exp = "e";
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) exp += s_[j++];
      if (take_digits(s_, j, exp)) {
        is_float = true;
        text += exp;
        i_ = j;
      }
    }
    if (i_ < s_.size() && (s_[i_] == 'j' || s_[i_] == 'J')) {
      throw ToolCallExtractionAborted("a complex number is not JSON serializable");
    }
    if (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) return std::nullopt;
    if (is_float) return json(std::strtod(text.c_str(), nullptr));
    // Python 3 forbids leading zeros in non-zero decimal integers ("012").
    if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos) return std::nullopt;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return json(std::strtod(text.c_str(), nullptr));  // beyond 64 bits
    return json(static_cast<std::uint64_t>(v));
  }

  std::string_view s_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::optional<long long> python_int(std::string_view text) {
  const std::string_view s = strip(text);
  std::size_t i = 0;
  std::string digits;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) digits += s[i++];
  if (!take_digits(s, i, digits) || i != s.size()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno == ERANGE) return std::nullopt;  // Python would succeed with a big int; we keep the text
  return v;
}

std::optional<double> python_float(std::string_view text) {
  const std::string_view s = strip(text);
  std::size_t i = 0;
  std::string num;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) num += s[i++];
  const std::string word = lower(s.substr(i));
  if (word == "inf" || word == "infinity") return num == "-" ? -HUGE_VAL : HUGE_VAL;
  if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
  const bool int_part = take_digits(s, i, num);
  bool frac_part = false;
  if (i < s.size() && s[i] == '.') {
    num += s[i++];
    frac_part = take_digits(s, i, num);
  }
  if (!int_part && !frac_part) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    num += 'e';
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) num += s[i++];
    if (!take_digits(s, i, num)) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(num.c_str(), nullptr);
}

std::optional<json> python_literal_eval(std::string_view text) {
  // ast.literal_eval strips leading spaces and tabs only.
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return LiteralParser(text).parse_all();
}

}  // namespace fp4serve::server::openai
