// Python str / dict / list methods reachable from templates (`content.split('</think>')`,
// `message.get('x')`, `d.items()`), with Python 3 semantics on code points.
#include <algorithm>
#include <cctype>

#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {
namespace {

using Method = Value (*)(const Value& self, CallArgs& a);

const std::string& str_arg(const CallArgs& a, std::size_t i, const char* name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string())
    throw TemplateRuntimeError(std::string(method) + "() argument must be str, not " + (v ? type_name(*v) : "nothing"),
                               a.pos);
  return v->str();
}

std::int64_t int_arg(const CallArgs& a, std::size_t i, const char* name, std::int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool())
    throw TemplateRuntimeError("'" + type_name(*v) + "' object cannot be interpreted as an integer", a.pos);
  return v->as_int();
}

// ASCII-only case mapping (the templates in use only case-map ASCII keywords).
char32_t to_lower(char32_t c) { return c < 128 ? static_cast<char32_t>(std::tolower(static_cast<int>(c))) : c; }
char32_t to_upper(char32_t c) { return c < 128 ? static_cast<char32_t>(std::toupper(static_cast<int>(c))) : c; }
bool is_cased_letter(char32_t c) { return c < 128 && std::isalpha(static_cast<int>(c)); }

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = f(c);
  return utf8_encode(u);
}

// startswith/endswith accept a str or a tuple (list) of str.
Value affix_test(const Value& self, CallArgs& a, bool prefix) {
  const Value* arg = a.get(0, nullptr);
  if (!arg) throw TemplateRuntimeError(std::string(prefix ? "startswith" : "endswith") + "() takes at least 1 argument", a.pos);
  std::u32string s = utf8_decode(self.str());
  const std::int64_t len = static_cast<std::int64_t>(s.size());
  std::int64_t b = int_arg(a, 1, nullptr, 0), e = int_arg(a, 2, nullptr, len);
  auto clamp = [&](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(0, i + len) : std::min(i, len); };
  b = clamp(b);
  e = clamp(e);
  const std::u32string sub = b <= e ? s.substr(static_cast<std::size_t>(b), static_cast<std::size_t>(e - b)) : std::u32string();
  auto test = [&](const Value& p) {
    if (!p.is_string()) throw TemplateRuntimeError("startswith/endswith first arg must be str or a tuple of str", a.pos);
    const std::u32string x = utf8_decode(p.str());
    if (b > e) return false;
    if (x.size() > sub.size()) return false;
    return prefix ? sub.compare(0, x.size(), x) == 0 : sub.compare(sub.size() - x.size(), x.size(), x) == 0;
  };
  if (arg->is_list()) return Value::boolean(std::any_of(arg->items().begin(), arg->items().end(), test));
  return Value::boolean(test(*arg));
}

Value str_split(const Value& self, CallArgs& a, bool from_right) {
  const Value* sep = a.get(0, "sep");
  std::int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
  List parts;
  if (!sep || sep->is_none()) {
    const std::u32string u = utf8_decode(self.str());
    std::vector<std::pair<std::size_t, std::size_t>> words;  // [begin, end)
    std::size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && py_isspace(u[i])) ++i;
      if (i >= u.size()) break;
      std::size_t j = i;
      while (j < u.size() && !py_isspace(u[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    // CPython split_whitespace / rsplit_whitespace: after maxsplit words, the rest of the string
    // (from the next word to the end, or from the start to the previous word) is one item.
    const std::size_t n = maxsplit < 0 ? words.size() : std::min<std::size_t>(static_cast<std::size_t>(maxsplit), words.size());
    auto word = [&](std::size_t k) { return Value::string(utf8_encode(u.substr(words[k].first, words[k].second - words[k].first))); };
    if (n >= words.size()) {
      for (std::size_t k = 0; k < words.size(); ++k) parts.push_back(word(k));
    } else if (!from_right) {
      for (std::size_t k = 0; k < n; ++k) parts.push_back(word(k));
      parts.push_back(Value::string(utf8_encode(u.substr(words[n].first))));
    } else {
      const std::size_t first_kept = words.size() - n;
      parts.push_back(Value::string(utf8_encode(u.substr(0, words[first_kept - 1].second))));
      for (std::size_t k = first_kept; k < words.size(); ++k) parts.push_back(word(k));
    }
    return Value::list(std::move(parts));
  }
  if (!sep->is_string()) throw TemplateRuntimeError("must be str or None, not " + type_name(*sep), a.pos);
  const std::string& s = self.str();
  const std::string& d = sep->str();
  if (d.empty()) throw TemplateRuntimeError("empty separator", a.pos);
  std::vector<std::string> pieces;
  if (!from_right) {
    std::size_t start = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<std::int64_t>(pieces.size()) >= maxsplit) break;
      const std::size_t f = s.find(d, start);
      if (f == std::string::npos) break;
      pieces.push_back(s.substr(start, f - start));
      start = f + d.size();
    }
    pieces.push_back(s.substr(start));
  } else {
    std::size_t end = s.size();
    std::vector<std::string> rev;
    while (true) {
      if (maxsplit >= 0 && static_cast<std::int64_t>(rev.size()) >= maxsplit) break;
      if (end < d.size()) break;
      const std::size_t f = s.rfind(d, end - d.size());
      if (f == std::string::npos) break;
      rev.push_back(s.substr(f + d.size(), end - f - d.size()));
      end = f;
    }
    rev.push_back(s.substr(0, end));
    pieces.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  return Value::list(std::move(parts));
}

Value str_strip(const Value& self, CallArgs& a, bool left, bool right) {
  const Value* chars = a.get(0, "chars");
  if (chars && !chars->is_none() && !chars->is_string())
    throw TemplateRuntimeError("strip arg must be None or str", a.pos);
  const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
  return Value::string(py_strip(self.str(), set, left, right), self.is_safe());
}

Value str_replace(const Value& self, CallArgs& a) {
  const std::string& old = str_arg(a, 0, nullptr, "replace");
  const std::string& rep = str_arg(a, 1, nullptr, "replace");
  std::int64_t count = int_arg(a, 2, "count", -1);
  const std::string& s = self.str();
  std::string out;
  if (old.empty()) {
    const std::u32string u = utf8_decode(s);
    for (std::size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || static_cast<std::int64_t>(i) < count) out += rep;
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return Value::string(std::move(out));
  }
  std::size_t start = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t f = s.find(old, start);
    if (f == std::string::npos) break;
    out.append(s, start, f - start);
    out += rep;
    start = f + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return Value::string(std::move(out));
}

Value str_find(const Value& self, CallArgs& a, bool reverse, bool strict) {
  const std::string& sub = str_arg(a, 0, nullptr, reverse ? "rfind" : "find");
  const std::size_t f = reverse ? self.str().rfind(sub) : self.str().find(sub);
  if (f == std::string::npos) {
    if (strict) throw TemplateRuntimeError("substring not found", a.pos);
    return Value::integer(-1);
  }
  return Value::integer(static_cast<std::int64_t>(utf8_length(std::string_view(self.str()).substr(0, f))));
}

Value str_count(const Value& self, CallArgs& a) {
  const std::string& sub = str_arg(a, 0, nullptr, "count");
  if (sub.empty()) return Value::integer(static_cast<std::int64_t>(utf8_length(self.str()) + 1));
  std::int64_t n = 0;
  for (std::size_t p = self.str().find(sub); p != std::string::npos; p = self.str().find(sub, p + sub.size())) ++n;
  return Value::integer(n);
}

Value str_splitlines(const Value& self, CallArgs& a) {
  const Value* keep = a.get(0, "keepends");
  const bool keepends = keep && truthy(*keep);
  const std::u32string u = utf8_decode(self.str());
  List out;
  std::size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (!is_break(u[i])) {
      ++i;
      continue;
    }
    std::size_t eol = i + ((u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1);
    out.push_back(Value::string(utf8_encode(u.substr(start, (keepends ? eol : i) - start))));
    start = i = eol;
  }
  if (start < u.size()) out.push_back(Value::string(utf8_encode(u.substr(start))));
  return Value::list(std::move(out));
}

Value str_join(const Value& self, CallArgs& a) {
  const Value* it = a.get(0, nullptr);
  if (!it) throw TemplateRuntimeError("join() takes exactly one argument", a.pos);
  std::string out;
  bool first = true;
  for (const Value& v : iterate(*it, a.pos)) {
    if (!v.is_string())
      throw TemplateRuntimeError("sequence item: expected str instance, " + type_name(v) + " found", a.pos);
    if (!first) out += self.str();
    first = false;
    out += v.str();
  }
  return Value::string(std::move(out));
}

template <typename Pred>
Value str_is(const Value& self, Pred pred) {
  const std::u32string u = utf8_decode(self.str());
  return Value::boolean(!u.empty() && std::all_of(u.begin(), u.end(), pred));
}

Value str_title(const Value& self) {
  std::u32string u = utf8_decode(self.str());
  bool prev_cased = false;
  for (auto& c : u) {
    const bool cased = is_cased_letter(c);
    c = cased ? (prev_cased ? to_lower(c) : to_upper(c)) : c;
    prev_cased = cased;
  }
  return Value::string(utf8_encode(u));
}

Value str_capitalize(const Value& self) {
  std::u32string u = utf8_decode(self.str());
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return Value::string(utf8_encode(u));
}

Value bind_to(const Value& self, const std::string& name, std::function<Value(const Value&, CallArgs&)> fn) {
  return Value::callable(type_name(self) + "." + name, [self, fn = std::move(fn)](CallArgs& a) { return fn(self, a); });
}

Value unsafe(const Value& self, const std::string& name) {
  const std::string msg = "access to attribute '" + name + "' of '" + type_name(self) + "' object is unsafe.";
  return Value::callable(name, [msg](CallArgs& a) -> Value { throw TemplateRuntimeError(msg, a.pos); });
}

Value string_method(const Value& self, const std::string& n) {
  if (n == "startswith") return bind_to(self, n, [](const Value& s, CallArgs& a) { return affix_test(s, a, true); });
  if (n == "endswith") return bind_to(self, n, [](const Value& s, CallArgs& a) { return affix_test(s, a, false); });
  if (n == "split") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_split(s, a, false); });
  if (n == "rsplit") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_split(s, a, true); });
  if (n == "strip") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_strip(s, a, true, true); });
  if (n == "lstrip") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_strip(s, a, true, false); });
  if (n == "rstrip") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_strip(s, a, false, true); });
  if (n == "lower") return bind_to(self, n, [](const Value& s, CallArgs&) { return Value::string(map_chars(s.str(), to_lower)); });
  if (n == "upper") return bind_to(self, n, [](const Value& s, CallArgs&) { return Value::string(map_chars(s.str(), to_upper)); });
  if (n == "title") return bind_to(self, n, [](const Value& s, CallArgs&) { return str_title(s); });
  if (n == "capitalize") return bind_to(self, n, [](const Value& s, CallArgs&) { return str_capitalize(s); });
  if (n == "replace") return bind_to(self, n, str_replace);
  if (n == "find") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_find(s, a, false, false); });
  if (n == "rfind") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_find(s, a, true, false); });
  if (n == "index") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_find(s, a, false, true); });
  if (n == "rindex") return bind_to(self, n, [](const Value& s, CallArgs& a) { return str_find(s, a, true, true); });
  if (n == "count") return bind_to(self, n, str_count);
  if (n == "join") return bind_to(self, n, str_join);
  if (n == "splitlines") return bind_to(self, n, str_splitlines);
  if (n == "isdigit" || n == "isnumeric" || n == "isdecimal")
    return bind_to(self, n, [](const Value& s, CallArgs&) { return str_is(s, [](char32_t c) { return c >= '0' && c <= '9'; }); });
  if (n == "isalpha")
    return bind_to(self, n, [](const Value& s, CallArgs&) { return str_is(s, [](char32_t c) { return c >= 128 || std::isalpha(static_cast<int>(c)); }); });
  if (n == "isalnum")
    return bind_to(self, n, [](const Value& s, CallArgs&) { return str_is(s, [](char32_t c) { return c >= 128 || std::isalnum(static_cast<int>(c)); }); });
  if (n == "isspace") return bind_to(self, n, [](const Value& s, CallArgs&) { return str_is(s, py_isspace); });
  if (n == "islower" || n == "isupper") {
    const bool lower = n == "islower";
    return bind_to(self, n, [lower](const Value& s, CallArgs&) {
      bool any = false;
      for (char32_t c : utf8_decode(s.str())) {
        if (!is_cased_letter(c)) continue;
        any = true;
        if (lower ? c != to_lower(c) : c != to_upper(c)) return Value::boolean(false);
      }
      return Value::boolean(any);
    });
  }
  return Value::undefined();
}

Value dict_method(const Value& self, const std::string& n) {
  if (n == "get")
    return bind_to(self, n, [](const Value& s, CallArgs& a) {
      const Value* k = a.get(0, nullptr);
      if (!k) throw TemplateRuntimeError("get expected at least 1 argument, got 0", a.pos);
      if (k->is_string())
        if (const Value* v = s.map().find(k->str())) return *v;
      const Value* def = a.get(1, nullptr);
      return def ? *def : Value::none();
    });
  if (n == "items")
    return bind_to(self, n, [](const Value& s, CallArgs&) {
      List out;
      for (const auto& [k, v] : s.map().items) out.push_back(Value::tuple({Value::string(k), v}));
      return Value::list(std::move(out));
    });
  if (n == "keys")
    return bind_to(self, n, [](const Value& s, CallArgs& a) { return Value::list(iterate(s, a.pos)); });
  if (n == "values")
    return bind_to(self, n, [](const Value& s, CallArgs&) {
      List out;
      for (const auto& kv : s.map().items) out.push_back(kv.second);
      return Value::list(std::move(out));
    });
  if (n == "copy") return bind_to(self, n, [](const Value& s, CallArgs&) { return Value::dict(s.map()); });
  if (n == "pop" || n == "popitem" || n == "setdefault" || n == "update" || n == "clear") return unsafe(self, n);
  return Value::undefined();
}

Value list_method(const Value& self, const std::string& n) {
  if (n == "count")
    return bind_to(self, n, [](const Value& s, CallArgs& a) {
      const Value* x = a.get(0, nullptr);
      if (!x) throw TemplateRuntimeError("count() takes exactly one argument", a.pos);
      return Value::integer(std::count_if(s.items().begin(), s.items().end(), [&](const Value& v) { return py_equal(v, *x); }));
    });
  if (n == "index")
    return bind_to(self, n, [](const Value& s, CallArgs& a) {
      const Value* x = a.get(0, nullptr);
      if (!x) throw TemplateRuntimeError("index() takes at least 1 argument", a.pos);
      for (std::size_t i = 0; i < s.items().size(); ++i)
        if (py_equal(s.items()[i], *x)) return Value::integer(static_cast<std::int64_t>(i));
      throw TemplateRuntimeError(py_repr(*x) + " is not in list", a.pos);
    });
  if (n == "copy") return bind_to(self, n, [](const Value& s, CallArgs&) { return Value::list(s.items()); });
  if (n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" || n == "reverse" ||
      n == "sort" || n == "clear")
    return unsafe(self, n);
  return Value::undefined();
}

}  // namespace

Value bind_method(const Value& obj, const std::string& name, SourcePos) {
  switch (obj.kind()) {
    case Value::Kind::String: return string_method(obj, name);
    case Value::Kind::Dict: return dict_method(obj, name);
    case Value::Kind::List: return list_method(obj, name);
    default: return Value::undefined();
  }
}

}  // namespace fp4serve::jinja
