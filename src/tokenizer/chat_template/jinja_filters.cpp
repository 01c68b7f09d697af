// jinja2's builtin filters (filters.py), with transformers' replacement for tojson.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {
namespace {

using Filter = Value (*)(const Value& v, CallArgs& a);

const Value* arg(const CallArgs& a, std::size_t i, const char* name) { return a.get(i, name); }
bool flag(const CallArgs& a, std::size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : def;
}

Value f_length(const Value& v, CallArgs& a) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value::integer(0);
    case Value::Kind::String: return Value::integer(static_cast<std::int64_t>(utf8_length(v.str())));
    case Value::Kind::List: return Value::integer(static_cast<std::int64_t>(v.items().size()));
    case Value::Kind::Dict: return Value::integer(static_cast<std::int64_t>(v.map().items.size()));
    default: throw TemplateRuntimeError("object of type '" + type_name(v) + "' has no len()", a.pos);
  }
}

Value f_string(const Value& v, CallArgs&) {
  if (v.is_string()) return v;
  return Value::string(py_str(v));
}

Value f_trim(const Value& v, CallArgs& a) {
  const Value* chars = arg(a, 0, "chars");
  const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
  return Value::string(py_strip(py_str(v), set, true, true), v.is_safe());
}

// transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value f_tojson(const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = flag(a, 0, "ensure_ascii", false);
  if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
    if (ind->is_string()) o.indent = ind->str();
    else if (ind->is_int()) o.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, ind->as_int())), ' ');
    else throw TemplateRuntimeError("tojson: indent must be an int or a string", a.pos);
  }
  if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2 || !sep->items()[0].is_string() || !sep->items()[1].is_string())
      throw TemplateRuntimeError("tojson: separators must be a pair of strings", a.pos);
    o.separators = std::make_pair(sep->items()[0].str(), sep->items()[1].str());
  }
  o.sort_keys = flag(a, 3, "sort_keys", false);
  return Value::string(py_json_dumps(v, o, a.pos));
}

Value f_items(const Value& v, CallArgs& a) {
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict()) throw TemplateRuntimeError("Can only get item pairs from a mapping.", a.pos);
  List out;
  for (const auto& [k, x] : v.map().items) out.push_back(Value::tuple({Value::string(k), x}));
  return Value::list(std::move(out));
}

Value f_list(const Value& v, CallArgs& a) { return Value::list(iterate(v, a.pos)); }

Value f_first(const Value& v, CallArgs& a) {
  auto items = iterate(v, a.pos);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(const Value& v, CallArgs& a) {
  auto items = iterate(v, a.pos);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Follows make_attrgetter: "a.b.0" walks attributes/items, integers index.
Value attr_path(const Value& v, const Value& attribute, SourcePos pos) {
  if (!attribute.is_string()) return get_item(v, attribute, pos);
  Value cur = v;
  const std::string& path = attribute.str();
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // A digits-only part indexes (past int64 it stays a string key, which finds nothing).
    std::int64_t index = 0;
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) &&
                         std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
    cur = get_item(cur, numeric ? Value::integer(index) : Value::string(part), pos);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value f_join(const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "d");
  const std::string sep = d ? py_str(*d) : "";
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Value> items = iterate(v, a.pos);
  if (attribute && !attribute->is_none())
    for (auto& x : items) x = attr_path(x, *attribute, a.pos);
  // autoescape is off in transformers' environment: a plain str.join(map(str, value)).
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += py_str(items[i]);
  }
  return Value::string(std::move(out));
}

Value f_default(const Value& v, CallArgs& a) {
  const bool boolean = flag(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) {
    const Value* d = arg(a, 0, "default_value");
    return d ? *d : Value::string("");
  }
  return v;
}

Value f_safe(const Value& v, CallArgs&) { return Value::string(py_str(v), true); }
Value f_escape(const Value& v, CallArgs&) {
  if (v.is_safe()) return v;
  return Value::string(html_escape(py_str(v)), true);
}

Value call_method(const Value& self, const char* name, CallArgs& a) {
  Value m = bind_method(self, name, a.pos);
  return m.fn().fn(a);
}
Value f_upper(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return call_method(Value::string(py_str(v)), "upper", none);
}
Value f_lower(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return call_method(Value::string(py_str(v)), "lower", none);
}
Value f_capitalize(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return call_method(Value::string(py_str(v)), "capitalize", none);
}
// jinja2's do_title is not str.title(): it capitalizes the pieces between runs of [-\s({\[<].
Value f_title(const Value& v, CallArgs&) {
  const std::u32string u = utf8_decode(py_str(v));
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  std::u32string out;
  bool start = true;
  for (char32_t c : u) {
    if (is_sep(c)) {
      out.push_back(c);
      start = true;
      continue;
    }
    const bool ascii = c < 128;
    out.push_back(ascii ? static_cast<char32_t>(start ? std::toupper(static_cast<int>(c)) : std::tolower(static_cast<int>(c))) : c);
    start = false;
  }
  return Value::string(utf8_encode(out));
}
Value f_replace(const Value& v, CallArgs& a) {
  CallArgs r{{}, {}, a.pos};
  const Value* old = arg(a, 0, "old");
  const Value* rep = arg(a, 1, "new");
  if (!old || !rep) throw TemplateRuntimeError("replace filter needs 'old' and 'new'", a.pos);
  r.positional = {Value::string(py_str(*old)), Value::string(py_str(*rep))};
  if (const Value* c = arg(a, 2, "count"); c && !c->is_none()) r.positional.push_back(*c);
  return call_method(Value::string(py_str(v)), "replace", r);
}

Value f_reverse(const Value& v, CallArgs& a) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(utf8_encode(u));
  }
  auto items = iterate(v, a.pos);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value sort_key(const Value& v, const Value* attribute, bool case_sensitive, SourcePos pos) {
  Value k = (attribute && !attribute->is_none()) ? attr_path(v, *attribute, pos) : v;
  if (!case_sensitive && k.is_string()) {
    CallArgs none{{}, {}, pos};
    return call_method(k, "lower", none);
  }
  return k;
}

Value f_sort(const Value& v, CallArgs& a) {
  const bool reverse = flag(a, 0, "reverse", false);
  const bool cs = flag(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  auto items = iterate(v, a.pos);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : items) keyed.emplace_back(sort_key(x, attribute, cs, a.pos), x);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    return reverse ? py_less(r.first, l.first, a.pos) : py_less(l.first, r.first, a.pos);
  });
  List out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return Value::list(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  if (!v.is_dict()) throw TemplateRuntimeError("dictsort: expected a mapping", a.pos);
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  const bool by_value = by && by->is_string() && by->str() == "value";
  const bool reverse = flag(a, 2, "reverse", false);
  List pairs;
  for (const auto& [k, x] : v.map().items) pairs.push_back(Value::tuple({Value::string(k), x}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& l, const Value& r) {
    Value kl = sort_key(l.items()[by_value ? 1 : 0], nullptr, cs, a.pos);
    Value kr = sort_key(r.items()[by_value ? 1 : 0], nullptr, cs, a.pos);
    return reverse ? py_less(kr, kl, a.pos) : py_less(kl, kr, a.pos);
  });
  return Value::list(std::move(pairs));
}

Value f_unique(const Value& v, CallArgs& a) {
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  List out, seen;
  for (auto& x : iterate(v, a.pos)) {
    Value k = sort_key(x, attribute, cs, a.pos);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  auto items = iterate(v, a.pos);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value ki = sort_key(items[i], attribute, cs, a.pos), kb = sort_key(items[best], attribute, cs, a.pos);
    if (want_max ? py_less(kb, ki, a.pos) : py_less(ki, kb, a.pos)) best = i;
  }
  return items[best];
}
Value f_min(const Value& v, CallArgs& a) { return min_max(v, a, false); }
Value f_max(const Value& v, CallArgs& a) { return min_max(v, a, true); }

Value add_numbers(const Value& l, const Value& r, SourcePos pos) {
  if (!l.is_number() || !r.is_number())
    throw TemplateRuntimeError("unsupported operand type(s) for +: '" + type_name(l) + "' and '" + type_name(r) + "'", pos);
  if (l.is_float() || r.is_float()) return Value::number(l.as_double() + r.as_double());
  return Value::integer(checked_add(l.as_int(), r.as_int(), pos));
}

Value f_sum(const Value& v, CallArgs& a) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (auto& x : iterate(v, a.pos))
    total = add_numbers(total, (attribute && !attribute->is_none()) ? attr_path(x, *attribute, a.pos) : x, a.pos);
  return total;
}

Value f_abs(const Value& v, CallArgs& a) {
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int() < 0 ? checked_sub(0, v.as_int(), a.pos) : v.as_int());
  throw TemplateRuntimeError("bad operand type for abs(): '" + type_name(v) + "'", a.pos);
}

Value f_int(const Value& v, CallArgs& a) {
  const Value* def = arg(a, 0, "default");
  const Value fallback = def ? *def : Value::integer(0);
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) return std::isfinite(v.as_double()) ? Value::integer(checked_trunc(v.as_double(), a.pos)) : fallback;
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), nullptr, true, true);
    std::size_t used = 0;
    try {
      const long long i = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::integer(i);
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value::integer(checked_trunc(d, a.pos));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value f_float(const Value& v, CallArgs& a) {
  const Value* def = arg(a, 0, "default");
  const Value fallback = def ? *def : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), nullptr, true, true);
    try {
      std::size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value::number(d);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value f_round(const Value& v, CallArgs& a) {
  if (!v.is_number()) throw TemplateRuntimeError("round: expected a number", a.pos);
  const Value* p = arg(a, 0, "precision");
  const Value* m = arg(a, 1, "method");
  const std::int64_t precision = p ? p->as_int() : 0;
  const std::string method = m && m->is_string() ? m->str() : "common";
  if (method == "common" && !v.is_float() && precision >= 0) return Value::integer(v.as_int());  // round(int, n) is int
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common") r = std::nearbyint(x);  // Python round(): half to even
  else if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else throw TemplateRuntimeError("method must be common, ceil or floor", a.pos);
  return Value::number(r / scale);
}

Value f_indent(const Value& v, CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string indention = w ? (w->is_string() ? w->str() : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, w->as_int())), ' '))
                            : std::string(4, ' ');
  const bool first = flag(a, 1, "first", false);
  const bool blank = flag(a, 2, "blank", false);
  Value s = Value::string(py_str(v) + "\n");  // jinja2 appends a newline on purpose
  CallArgs none{{}, {}, a.pos};
  const Value lines = call_method(s, "splitlines", none);
  std::string rv;
  const auto& ls = lines.items();
  if (blank) {
    for (std::size_t i = 0; i < ls.size(); ++i) rv += (i ? "\n" + indention : "") + ls[i].str();
  } else {
    rv = ls.empty() ? "" : ls[0].str();
    for (std::size_t i = 1; i < ls.size(); ++i) rv += "\n" + (ls[i].str().empty() ? "" : indention + ls[i].str());
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value f_attr(const Value& v, CallArgs& a) {
  const Value* n = arg(a, 0, "name");
  if (!n || !n->is_string()) throw TemplateRuntimeError("attr: name must be a string", a.pos);
  return get_attr(v, n->str(), a.pos);
}

// select/reject/selectattr/rejectattr: shared core of jinja2's select_or_reject.
Value select_or_reject(const Value& v, CallArgs& a, bool lookup_attr, bool expect) {
  std::size_t next = 0;
  Value attribute;
  if (lookup_attr) {
    const Value* at = arg(a, next++, nullptr);
    if (!at) throw TemplateRuntimeError("selectattr/rejectattr need an attribute name", a.pos);
    attribute = *at;
  }
  std::string test;
  if (const Value* t = arg(a, next, nullptr)) {
    if (!t->is_string()) throw TemplateRuntimeError("test name must be a string", a.pos);
    test = t->str();
    ++next;
  }
  CallArgs targs{{}, a.keyword, a.pos};
  for (std::size_t i = next; i < a.positional.size(); ++i) targs.positional.push_back(a.positional[i]);
  List out;
  for (auto& x : iterate(v, a.pos)) {
    const Value subject = lookup_attr ? attr_path(x, attribute, a.pos) : x;
    bool ok;
    if (test.empty()) {
      ok = truthy(subject);
    } else {
      CallArgs copy = targs;
      if (!apply_test(test, subject, copy, &ok)) throw TemplateRuntimeError("No test named '" + test + "'.", a.pos);
    }
    if (ok == expect) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(const Value& v, CallArgs& a) { return select_or_reject(v, a, false, true); }
Value f_reject(const Value& v, CallArgs& a) { return select_or_reject(v, a, false, false); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_or_reject(v, a, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_or_reject(v, a, true, false); }

Value f_map(const Value& v, CallArgs& a) {
  List out;
  const Value* attribute = nullptr;
  for (const auto& [k, x] : a.keyword)
    if (k == "attribute") attribute = &x;
  if (attribute) {
    const Value* def = nullptr;
    for (const auto& [k, x] : a.keyword)
      if (k == "default") def = &x;
    for (auto& x : iterate(v, a.pos)) {
      Value r = attr_path(x, *attribute, a.pos);
      out.push_back(r.is_undefined() && def ? *def : r);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string())
    throw TemplateRuntimeError("map requires a filter argument", a.pos);
  const std::string name = a.positional[0].str();
  CallArgs fargs{{a.positional.begin() + 1, a.positional.end()}, a.keyword, a.pos};
  for (auto& x : iterate(v, a.pos)) {
    CallArgs copy = fargs;
    Value r;
    if (!apply_filter(name, x, copy, &r)) throw TemplateRuntimeError("No filter named '" + name + "'.", a.pos);
    out.push_back(std::move(r));
  }
  return Value::list(std::move(out));
}

Value f_batch(const Value& v, CallArgs& a) {
  const Value* n = arg(a, 0, "linecount");
  if (!n || !n->is_int() || n->as_int() <= 0) throw TemplateRuntimeError("batch: linecount must be a positive int", a.pos);
  const Value* fill = arg(a, 1, "fill_with");
  List out, cur;
  for (auto& x : iterate(v, a.pos)) {
    cur.push_back(x);
    if (static_cast<std::int64_t>(cur.size()) == n->as_int()) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<std::int64_t>(cur.size()) < n->as_int()) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_wordcount(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return Value::integer(static_cast<std::int64_t>(call_method(Value::string(py_str(v)), "split", none).items().size()));
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> table = {
      {"length", f_length}, {"count", f_length}, {"string", f_string}, {"trim", f_trim},
      {"tojson", f_tojson}, {"items", f_items}, {"list", f_list}, {"first", f_first},
      {"last", f_last}, {"join", f_join}, {"default", f_default}, {"d", f_default},
      {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape}, {"upper", f_upper},
      {"lower", f_lower}, {"capitalize", f_capitalize}, {"title", f_title}, {"replace", f_replace},
      {"reverse", f_reverse}, {"sort", f_sort}, {"dictsort", f_dictsort}, {"unique", f_unique},
      {"min", f_min}, {"max", f_max}, {"sum", f_sum}, {"abs", f_abs},
      {"int", f_int}, {"float", f_float}, {"round", f_round}, {"indent", f_indent},
      {"attr", f_attr}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"map", f_map}, {"batch", f_batch}, {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

bool apply_filter(const std::string& name, const Value& input, CallArgs& args, Value* out) {
  const auto it = filters().find(name);
  if (it == filters().end()) return false;
  *out = it->second(input, args);
  return true;
}

}  // namespace fp4serve::jinja
