// jinja2's object protocol (attribute/item access, iteration, `in`), Python string/dict/list
// methods, builtin filters, tests and globals -- the parts of Python a chat template can reach
// through ImmutableSandboxedEnvironment. Mutating methods (list.append, dict.update, ...) are
// refused as the immutable sandbox refuses them.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_value.h"

namespace fp4serve::jinja {

// Using an Undefined value in a way that needs a value (jinja2's UndefinedError).
[[noreturn]] void throw_undefined(const Value& undefined, SourcePos pos);

// obj.name: a bound method for str/dict/list method names, else a dict key / namespace attribute,
// else Undefined. Throws when obj is Undefined.
Value get_attr(const Value& obj, const std::string& name, SourcePos pos);
// obj[key]: dict key, list/str index (negative allowed); falls back to get_attr for string keys.
Value get_item(const Value& obj, const Value& key, SourcePos pos);
// obj[start:stop:step] with Python semantics; null pointers are omitted parts.
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step, SourcePos pos);
// `item in container`.
bool contains(const Value& container, const Value& item, SourcePos pos);
// for x in v: list items, dict keys, string characters; Undefined iterates as empty.
std::vector<Value> iterate(const Value& v, SourcePos pos);
// A bound str/dict/list method, or Undefined when obj has no such method.
Value bind_method(const Value& obj, const std::string& name, SourcePos pos);

// Filters and tests. Return false when no filter/test of that name exists.
bool apply_filter(const std::string& name, const Value& input, CallArgs& args, Value* out);
bool apply_test(const std::string& name, const Value& input, CallArgs& args, bool* out);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// range, namespace, dict, raise_exception, strftime_now (transformers adds the last two).
void add_builtin_globals(Dict& globals);

// Sandbox bound on range() (jinja2.sandbox.MAX_RANGE).
inline constexpr std::int64_t kMaxRange = 100000;

}  // namespace fp4serve::jinja
