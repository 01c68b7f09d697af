// jinja2's object protocol: Environment.getattr / getitem as the sandbox implements them.
#include <algorithm>

#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {

void throw_undefined(const Value& undefined, SourcePos pos) {
  throw TemplateRuntimeError(undefined.str().empty() ? "value is undefined" : undefined.str(), pos);
}

static std::string object_desc(const Value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

static Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + name + "'");
}

Value get_attr(const Value& obj, const std::string& name, SourcePos pos) {
  if (obj.is_undefined()) throw_undefined(obj, pos);
  if (obj.is_namespace()) {
    const Value* v = obj.map().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  // getattr(obj, name) first: methods win over dict keys of the same name, as in jinja2.
  Value method = bind_method(obj, name, pos);
  if (!method.is_undefined()) return method;
  if (obj.is_dict()) {
    const Value* v = obj.map().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  return no_attribute(obj, name);
}

static bool normalize_index(std::int64_t& i, std::size_t size) {
  if (i < 0) i += static_cast<std::int64_t>(size);
  return i >= 0 && i < static_cast<std::int64_t>(size);
}

Value get_item(const Value& obj, const Value& key, SourcePos pos) {
  if (obj.is_undefined()) throw_undefined(obj, pos);
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.map().find(key.str())) return *v;
      Value m = bind_method(obj, key.str(), pos);
      if (!m.is_undefined()) return m;
    }
    return Value::undefined("'dict object' has no attribute " + py_repr(key));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    std::int64_t i = key.as_int();
    if (obj.is_list()) {
      if (!normalize_index(i, obj.items().size())) return Value::undefined("list object has no element " + py_str(key));
      return obj.items()[static_cast<std::size_t>(i)];
    }
    const std::u32string u = utf8_decode(obj.str());
    if (!normalize_index(i, u.size())) return Value::undefined("str object has no element " + py_str(key));
    return Value::string(utf8_encode(u.substr(static_cast<std::size_t>(i), 1)));
  }
  if (key.is_string()) return get_attr(obj, key.str(), pos);
  return Value::undefined("'" + object_desc(obj) + "' has no attribute " + py_repr(key));
}

// Python slice.indices() semantics.
static void slice_indices(std::int64_t len, const Value* start, const Value* stop, const Value* step, std::int64_t& b,
                          std::int64_t& e, std::int64_t& s, SourcePos pos) {
  auto as_index = [&](const Value* v, const char* what) -> const Value* {
    if (!v || v->is_none()) return nullptr;
    if (!v->is_int() && !v->is_bool())
      throw TemplateRuntimeError(std::string("slice ") + what + " must be an integer or None", pos);
    return v;
  };
  start = as_index(start, "start");
  stop = as_index(stop, "stop");
  step = as_index(step, "step");
  s = step ? step->as_int() : 1;
  if (s == 0) throw TemplateRuntimeError("slice step cannot be zero", pos);
  auto clamp = [&](const Value* v, std::int64_t def) {
    if (!v) return def;
    std::int64_t i = v->as_int();
    if (i < 0) {
      i += len;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= len) {
      i = s < 0 ? len - 1 : len;
    }
    return i;
  };
  b = clamp(start, s < 0 ? len - 1 : 0);
  e = clamp(stop, s < 0 ? -1 : len);
}

template <typename Seq>
static Seq slice_seq(const Seq& in, std::int64_t b, std::int64_t e, std::int64_t s) {
  Seq out;  // 128-bit index: b + s must not overflow for huge steps
  if (s > 0)
    for (__int128 i = b; i < e; i += s) out.push_back(in[static_cast<std::size_t>(i)]);
  else
    for (__int128 i = b; i > e; i += s) out.push_back(in[static_cast<std::size_t>(i)]);
  return out;
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step, SourcePos pos) {
  if (obj.is_undefined()) throw_undefined(obj, pos);
  std::int64_t b = 0, e = 0, s = 1;
  if (obj.is_list()) {
    slice_indices(static_cast<std::int64_t>(obj.items().size()), start, stop, step, b, e, s, pos);
    return Value::list(slice_seq(obj.items(), b, e, s));
  }
  if (obj.is_string()) {
    const std::u32string u = utf8_decode(obj.str());
    slice_indices(static_cast<std::int64_t>(u.size()), start, stop, step, b, e, s, pos);
    return Value::string(utf8_encode(slice_seq(u, b, e, s)), obj.is_safe());
  }
  return Value::undefined("'" + object_desc(obj) + "' is not subscriptable");
}

bool contains(const Value& container, const Value& item, SourcePos pos) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        throw TemplateRuntimeError("'in <string>' requires string as left operand, not " + type_name(item), pos);
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      return std::any_of(container.items().begin(), container.items().end(),
                         [&](const Value& v) { return py_equal(v, item); });
    case Value::Kind::Dict:
      return item.is_string() && container.map().find(item.str()) != nullptr;
    default:
      throw TemplateRuntimeError("argument of type '" + type_name(container) + "' is not iterable", pos);
  }
}

std::vector<Value> iterate(const Value& v, SourcePos pos) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.map().items.size());
      for (const auto& kv : v.map().items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      for (char32_t cp : utf8_decode(v.str())) chars.push_back(Value::string(utf8_encode(std::u32string(1, cp))));
      return chars;
    }
    default:
      throw TemplateRuntimeError("'" + type_name(v) + "' object is not iterable", pos);
  }
}

}  // namespace fp4serve::jinja
