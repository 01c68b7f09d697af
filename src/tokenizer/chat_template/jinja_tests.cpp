// jinja2's builtin tests (tests.py) and the globals transformers' environment provides.
#include <chrono>
#include <ctime>
#include <map>

#include "tokenizer/chat_template/jinja_builtins.h"

namespace fp4serve::jinja {
namespace {

using Test = bool (*)(const Value& v, CallArgs& a);

const Value& need(const CallArgs& a, std::size_t i, const char* what) {
  const Value* v = a.get(i, nullptr);
  if (!v) throw TemplateRuntimeError(std::string("test '") + what + "' needs an argument", a.pos);
  return *v;
}

bool t_defined(const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(const Value& v, CallArgs&) { return v.is_number(); }  // bool is a Number in Python
bool t_string(const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, CallArgs&) { return v.is_dict(); }
// iter(value) succeeds: str, list, dict, and Undefined (which iterates as empty).
bool t_iterable(const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }
// len(value) and value.__getitem__ exist: also true for dicts and for Undefined.
bool t_sequence(const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }
bool t_callable(const Value& v, CallArgs&) { return v.is_callable(); }
bool t_escaped(const Value& v, CallArgs&) { return v.is_safe(); }
bool t_sameas(const Value& v, CallArgs& a) { return v.same_object(need(a, 0, "sameas")); }
bool t_eq(const Value& v, CallArgs& a) { return py_equal(v, need(a, 0, "eq")); }
bool t_ne(const Value& v, CallArgs& a) { return !py_equal(v, need(a, 0, "ne")); }
bool t_lt(const Value& v, CallArgs& a) { return py_less(v, need(a, 0, "lt"), a.pos); }
bool t_le(const Value& v, CallArgs& a) { return !py_less(need(a, 0, "le"), v, a.pos); }
bool t_gt(const Value& v, CallArgs& a) { return py_less(need(a, 0, "gt"), v, a.pos); }
bool t_ge(const Value& v, CallArgs& a) { return !py_less(v, need(a, 0, "ge"), a.pos); }
bool t_in(const Value& v, CallArgs& a) { return contains(need(a, 0, "in"), v, a.pos); }
bool int_or_throw(const Value& v, const CallArgs& a) {
  if (!v.is_int() && !v.is_bool()) throw TemplateRuntimeError("expected an integer, got " + type_name(v), a.pos);
  return true;
}
bool t_odd(const Value& v, CallArgs& a) { return int_or_throw(v, a) && (v.as_int() % 2 != 0); }
bool t_even(const Value& v, CallArgs& a) { return int_or_throw(v, a) && (v.as_int() % 2 == 0); }
bool t_divisibleby(const Value& v, CallArgs& a) {
  const Value& n = need(a, 0, "divisibleby");
  int_or_throw(v, a);
  int_or_throw(n, a);
  if (n.as_int() == 0) throw TemplateRuntimeError("integer division or modulo by zero", a.pos);
  return v.as_int() % n.as_int() == 0;
}
bool t_lower(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return v.is_string() && truthy(bind_method(v, "islower", a.pos).fn().fn(none));
}
bool t_upper(const Value& v, CallArgs& a) {
  CallArgs none{{}, {}, a.pos};
  return v.is_string() && truthy(bind_method(v, "isupper", a.pos).fn().fn(none));
}
bool t_filter(const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); }
bool t_test(const Value& v, CallArgs&) { return v.is_string() && has_test(v.str()); }

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> table = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float},
      {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable}, {"escaped", t_escaped}, {"sameas", t_sameas},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne},
      {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge},
      {"in", t_in}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"lower", t_lower}, {"upper", t_upper}, {"filter", t_filter}, {"test", t_test},
  };
  return table;
}

Value g_range(CallArgs& a) {
  std::int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : a.positional)
    if (!v.is_int() && !v.is_bool())
      throw TemplateRuntimeError("'" + type_name(v) + "' object cannot be interpreted as an integer", a.pos);
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else if (a.positional.size() == 2 || a.positional.size() == 3) {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  } else {
    throw TemplateRuntimeError("range expected 1 to 3 arguments", a.pos);
  }
  if (step == 0) throw TemplateRuntimeError("range() arg 3 must not be zero", a.pos);
  const __int128 lo = start, hi = stop, st = step;
  const __int128 count = st > 0 ? (hi > lo ? (hi - lo + st - 1) / st : 0) : (lo > hi ? (lo - hi - st - 1) / (-st) : 0);
  if (count > kMaxRange)
    throw TemplateLimitError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                                 std::to_string(kMaxRange) + ").",
                             a.pos);
  const auto n = static_cast<std::int64_t>(count);
  List out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out.push_back(Value::integer(static_cast<std::int64_t>(lo + st * i)));
  return Value::list(std::move(out));
}

Dict kwargs_dict(const CallArgs& a, const char* fn) {
  Dict d;
  for (const Value& p : a.positional) {
    if (!p.is_dict()) throw TemplateRuntimeError(std::string(fn) + "() positional argument must be a mapping", a.pos);
    for (const auto& [k, v] : p.map().items) d.set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.set(k, v);
  return d;
}

Value g_strftime_now(CallArgs& a) {
  const Value* fmt = a.get(0, "format");
  if (!fmt || !fmt->is_string()) throw TemplateRuntimeError("strftime_now() needs a format string", a.pos);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);  // datetime.now(): local time
  char buf[512];
  const std::size_t n = std::strftime(buf, sizeof(buf), fmt->str().c_str(), &tm);
  return Value::string(std::string(buf, n));
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(const std::string& name, const Value& input, CallArgs& args, bool* out) {
  const auto it = tests().find(name);
  if (it == tests().end()) return false;
  *out = it->second(input, args);
  return true;
}

void add_builtin_globals(Dict& globals) {
  globals.set("range", Value::callable("range", g_range));
  globals.set("namespace", Value::callable("namespace", [](CallArgs& a) { return Value::ns(kwargs_dict(a, "namespace")); }));
  globals.set("dict", Value::callable("dict", [](CallArgs& a) { return Value::dict(kwargs_dict(a, "dict")); }));
  globals.set("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Value {
                const Value* m = a.get(0, "message");
                throw TemplateRaisedError(m ? py_str(*m) : "", a.pos);
              }));
  globals.set("strftime_now", Value::callable("strftime_now", g_strftime_now));
}

}  // namespace fp4serve::jinja
