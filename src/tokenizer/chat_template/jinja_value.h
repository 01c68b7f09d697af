// The value model of the template engine: Python objects as jinja2 sees them.
//
// Lists, dicts and namespaces are shared by reference (like Python objects), so `set ns.x = ...`
// is visible through every name that refers to the namespace. Dicts keep insertion order because
// tojson output must list keys in the order the request gave them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template/jinja_error.h"

namespace fp4serve::jinja {

class Value;
using List = std::vector<Value>;

// Deepest nesting of lists/dicts a value may have (JSON input included). Python's json module and
// repr give up near 1000 levels; this keeps recursive repr/compare/destruction stack-safe.
inline constexpr int kMaxValueDepth = 512;

// Insertion-ordered string-keyed map (chat template dicts are small; linear lookup is fine).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  SourcePos pos;

  // Python-style binding: the i-th positional argument or the keyword `name`, else nullptr.
  const Value* get(std::size_t index, const char* name) const;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind : std::uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool safe = false);
  static Value list(List items = {});
  static Value tuple(List items);  // a list that prints as a Python tuple
  static Value dict(Dict d = {});
  static Value ns(Dict d = {});
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_safe() const { return safe_; }  // a markupsafe.Markup string (made by |safe)
  bool is_tuple() const { return tuple_; }
  // Container nesting depth (0 for scalars) and whether a namespace is reachable from this value;
  // both are computed on construction so that deep or cyclic structures can be refused cheaply.
  int depth() const { return depth_; }
  bool holds_namespace() const { return has_ns_; }

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }  // string value; Undefined: its hint
  const List& items() const { return *list_; }
  List& items_mut() { return *list_; }
  const Dict& map() const { return *dict_; }
  Dict& map_mut() { return *dict_; }
  const Callable& fn() const { return *fn_; }
  bool same_object(const Value& o) const;

 private:
  Kind kind_ = Kind::Undefined;
  bool safe_ = false;
  bool tuple_ = false;
  bool has_ns_ = false;
  std::uint16_t depth_ = 0;
  void compute_nesting();
  bool b_ = false;
  std::int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// --- Python semantics -------------------------------------------------------------------------

bool truthy(const Value& v);
std::string type_name(const Value& v);      // Python type name: 'str', 'dict', 'NoneType', ...
std::string py_str(const Value& v);         // str(v); Undefined -> ""
std::string py_repr(const Value& v);        // repr(v)
std::string py_float_repr(double d);        // repr(float)
bool py_equal(const Value& a, const Value& b);
// a < b for numbers, strings and lists; throws TemplateRuntimeError otherwise.
bool py_less(const Value& a, const Value& b, SourcePos pos);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys) exactly as Python writes it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt = single line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string py_json_dumps(const Value& v, const JsonDumpOptions& opts, SourcePos pos);

// int64 arithmetic that throws where Python would switch to big integers (templates never need
// them; silently wrapping would be wrong and signed overflow is undefined behaviour).
std::int64_t checked_add(std::int64_t a, std::int64_t b, SourcePos pos);
std::int64_t checked_sub(std::int64_t a, std::int64_t b, SourcePos pos);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, SourcePos pos);
// Python's int(x) of a finite float: truncated toward zero; throws where it needs more than 64 bits.
std::int64_t checked_trunc(double x, SourcePos pos);

// markupsafe.escape for plain strings.
std::string html_escape(const std::string& s);

}  // namespace fp4serve::jinja
