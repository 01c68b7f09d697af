#include "tokenizer/chat_template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(std::size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  if (name)
    for (const auto& [k, v] : keyword)
      if (k == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s, bool safe) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::move(s);
  v.safe_ = safe;
  return v;
}
void Value::compute_nesting() {
  int d = 0;
  bool ns = kind_ == Kind::Namespace;
  auto visit = [&](const Value& c) {
    d = std::max(d, static_cast<int>(c.depth_));
    ns = ns || c.has_ns_;
  };
  if (list_)
    for (const auto& c : *list_) visit(c);
  if (dict_)
    for (const auto& kv : dict_->items) visit(kv.second);
  if (d + 1 > kMaxValueDepth)
    throw TemplateLimitError("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels", {});
  depth_ = static_cast<std::uint16_t>(d + 1);
  has_ns_ = ns;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<List>(std::move(items));
  v.compute_nesting();
  return v;
}
Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  v.compute_nesting();
  return v;
}
Value Value::ns(Dict d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  v.has_ns_ = true;
  return v;
}
Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return none();
    case T::boolean: return boolean(j.get<bool>());
    case T::number_integer: return integer(j.get<std::int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return number(static_cast<double>(u));
      return integer(static_cast<std::int64_t>(u));
    }
    case T::number_float: return number(j.get<double>());
    case T::string: return string(j.get<std::string>());
    case T::array: {  // JSON arrays are Python lists
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(from_json(e));
      return list(std::move(l));
    }
    case T::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return dict(std::move(d));
    }
    default: return undefined("unsupported JSON value");
  }
}

bool Value::same_object(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::List: return list_ == o.list_;
    case Kind::Dict:
    case Kind::Namespace: return dict_ == o.dict_;
    case Kind::Callable: return fn_ == o.fn_;
    default: return py_equal(*this, o);
  }
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_double() != 0.0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List: return !v.items().empty();
    case Value::Kind::Dict: return !v.map().items.empty();
    default: return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return v.is_safe() ? "Markup" : "str";
    case Value::Kind::List: return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const auto epos = sci.find('e');
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (std::size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) {
        out += digits + std::string(static_cast<std::size_t>(exp + 1 - n), '0') + ".0";
      } else {
        out += digits.substr(0, static_cast<std::size_t>(exp + 1)) + "." + digits.substr(static_cast<std::size_t>(exp + 1));
      }
    } else {
      out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return out;
}

static std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t cp : utf8_decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7F || py_isprintable(cp)) {
      utf8_append(out, cp);
    } else if (cp <= 0xFF) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::String:
      return v.is_safe() ? "Markup(" + repr_string(v.str()) + ")" : repr_string(v.str());
    case Value::Kind::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      bool first = true;
      for (const auto& e : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(e);
      }
      if (v.is_tuple()) return out + (v.items().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, e] : v.map().items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + py_repr(e);
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return py_float_repr(v.as_double());
    case Value::Kind::String: return v.str();
    case Value::Kind::Callable: return "<function " + v.fn().name + ">";
    default: return py_repr(v);
  }
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (std::size_t i = 0; i < a.items().size(); ++i)
        if (!py_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.map().items.size() != b.map().items.size()) return false;
      for (const auto& [k, v] : a.map().items) {
        const Value* o = b.map().find(k);
        if (!o || !py_equal(v, *o)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

bool py_less(const Value& a, const Value& b, SourcePos pos) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i], pos);
    }
    return x.size() < y.size();
  }
  throw TemplateRuntimeError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                                 type_name(b) + "'",
                             pos);
}

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (char32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
          if (cp > 0xFFFF) {
            const char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                          static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          utf8_append(out, cp);
        }
    }
  }
  out.push_back('"');
}

static void json_dump(std::string& out, const Value& v, const JsonDumpOptions& o, const std::string& item_sep,
                      const std::string& key_sep, int level, SourcePos pos) {
  if (level > 512) throw TemplateLimitError("tojson: value nested too deeply", pos);
  auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      const double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += py_float_repr(d);
      return;
    }
    case Value::Kind::String: json_string(out, v.str(), o.ensure_ascii); return;
    case Value::Kind::List: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      if (o.indent) newline(level + 1);
      bool first = true;
      for (const auto& e : v.items()) {
        if (!first) {
          out += item_sep;
          if (o.indent) newline(level + 1);
        }
        first = false;
        json_dump(out, e, o, item_sep, key_sep, level + 1, pos);
      }
      if (o.indent) newline(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::Dict: {
      if (v.map().items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& kv : v.map().items) entries.push_back(&kv);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      if (o.indent) newline(level + 1);
      bool first = true;
      for (const auto* kv : entries) {
        if (!first) {
          out += item_sep;
          if (o.indent) newline(level + 1);
        }
        first = false;
        json_string(out, kv->first, o.ensure_ascii);
        out += key_sep;
        json_dump(out, kv->second, o, item_sep, key_sep, level + 1, pos);
      }
      if (o.indent) newline(level);
      out.push_back('}');
      return;
    }
    default:
      throw TemplateRuntimeError("Object of type " + type_name(v) + " is not JSON serializable", pos);
  }
}

std::string py_json_dumps(const Value& v, const JsonDumpOptions& opts, SourcePos pos) {
  std::string item_sep = opts.indent ? "," : ", ";
  std::string key_sep = ": ";
  if (opts.separators) {
    item_sep = opts.separators->first;
    key_sep = opts.separators->second;
  }
  std::string out;
  json_dump(out, v, opts, item_sep, key_sep, 0, pos);
  return out;
}

static std::int64_t overflow(SourcePos pos) {
  throw TemplateRuntimeError("integer result does not fit in 64 bits", pos);
}
std::int64_t checked_add(std::int64_t a, std::int64_t b, SourcePos pos) {
  std::int64_t r;
  return __builtin_add_overflow(a, b, &r) ? overflow(pos) : r;
}
std::int64_t checked_sub(std::int64_t a, std::int64_t b, SourcePos pos) {
  std::int64_t r;
  return __builtin_sub_overflow(a, b, &r) ? overflow(pos) : r;
}
std::int64_t checked_mul(std::int64_t a, std::int64_t b, SourcePos pos) {
  std::int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? overflow(pos) : r;
}

std::int64_t checked_trunc(double x, SourcePos pos) {
  const double t = std::trunc(x);
  // [-2^63, 2^63): both bounds exact in double; a cast outside them is undefined behaviour.
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) return overflow(pos);
  return static_cast<std::int64_t>(t);
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace fp4serve::jinja
