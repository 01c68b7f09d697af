#include "server/openai/request_fields.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

ValidationIssue make_issue(const char* type, Loc loc, std::string msg, const Json& input,
                           std::optional<std::string> ctx_repr) {
  ValidationIssue i;
  i.type = type;
  i.loc = std::move(loc);
  i.msg = std::move(msg);
  i.input = input;
  i.ctx_repr = std::move(ctx_repr);
  return i;
}

namespace {

void add_issue(std::vector<ValidationIssue>& issues, const char* type, const Loc& loc,
               const char* msg, const Json& input) {
  ValidationIssue issue;
  issue.type = type;
  issue.loc = loc;
  issue.msg = msg;
  issue.input = input;
  issues.push_back(std::move(issue));
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Loc child(const Loc& loc, const std::string& key) {
  Loc out = loc;
  out.push_back(key);
  return out;
}

constexpr const char* kIntType = "Input should be a valid integer";
constexpr const char* kIntParsing = "Input should be a valid integer, unable to parse string as an integer";
constexpr const char* kIntFromFloat = "Input should be a valid integer, got a number with a fractional part";
constexpr const char* kFloatType = "Input should be a valid number";
constexpr const char* kFloatParsing = "Input should be a valid number, unable to parse string as a number";
constexpr const char* kBoolType = "Input should be a valid boolean";
constexpr const char* kBoolParsing = "Input should be a valid boolean, unable to interpret input";
constexpr const char* kStringType = "Input should be a valid string";
constexpr const char* kListType = "Input should be a valid list";
constexpr const char* kDictType = "Input should be a valid dictionary";

}  // namespace

std::optional<bool> coerce_bool(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() || v.is_number_unsigned()) {
    const auto i = v.get<int64_t>();
    if (i == 0 || i == 1) return i == 1;
    add_issue(issues, "bool_parsing", loc, kBoolParsing, v);
    return std::nullopt;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == 0.0 || d == 1.0) return d == 1.0;
    add_issue(issues, "bool_parsing", loc, kBoolParsing, v);
    return std::nullopt;
  }
  if (v.is_string()) {
    const std::string s = lower(trim(v.get<std::string>()));
    if (s == "0" || s == "off" || s == "f" || s == "false" || s == "n" || s == "no") return false;
    if (s == "1" || s == "on" || s == "t" || s == "true" || s == "y" || s == "yes") return true;
    add_issue(issues, "bool_parsing", loc, kBoolParsing, v);
    return std::nullopt;
  }
  add_issue(issues, "bool_type", loc, kBoolType, v);
  return std::nullopt;
}

std::optional<int64_t> coerce_int(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(u);
    // Python ints are unbounded; ours are not. Say so in pydantic's words for a bounded int.
    add_issue(issues, "less_than_equal", loc, "Input should be less than or equal to 9223372036854775807", v);
    return std::nullopt;
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      add_issue(issues, "int_from_float", loc, kIntFromFloat, v);
      return std::nullopt;
    }
    if (std::fabs(d) > 9.2e18) {
      add_issue(issues, "less_than_equal", loc, "Input should be less than or equal to 9223372036854775807", v);
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  if (v.is_string()) {
    const std::string s = trim(v.get<std::string>());
    std::size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    bool digits = i < s.size();
    for (std::size_t k = i; k < s.size(); ++k) digits = digits && std::isdigit(static_cast<unsigned char>(s[k]));
    if (digits) {
      errno = 0;
      const long long value = std::strtoll(s.c_str(), nullptr, 10);
      if (errno == 0) return static_cast<int64_t>(value);
    }
    add_issue(issues, "int_parsing", loc, kIntParsing, v);
    return std::nullopt;
  }
  add_issue(issues, "int_type", loc, kIntType, v);
  return std::nullopt;
}

std::optional<double> coerce_float(const Json& v, const Loc& loc, std::vector<ValidationIssue>& issues) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string()) {
    const std::string s = trim(v.get<std::string>());
    const std::string l = lower(s);
    if (l == "inf" || l == "+inf" || l == "infinity" || l == "+infinity") return INFINITY;
    if (l == "-inf" || l == "-infinity") return -INFINITY;
    if (l == "nan" || l == "+nan" || l == "-nan") return NAN;
    if (!s.empty() && s.find_first_of("xXpP") == std::string::npos) {
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end && *end == '\0') return d;
    }
    add_issue(issues, "float_parsing", loc, kFloatParsing, v);
    return std::nullopt;
  }
  add_issue(issues, "float_type", loc, kFloatType, v);
  return std::nullopt;
}

std::optional<std::string> coerce_string(const Json& v, const Loc& loc,
                                         std::vector<ValidationIssue>& issues) {
  if (v.is_string()) return v.get<std::string>();
  add_issue(issues, "string_type", loc, kStringType, v);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> coerce_int_list(const Json& v, const Loc& loc,
                                                    std::vector<ValidationIssue>& issues) {
  if (!v.is_array()) {
    add_issue(issues, "list_type", loc, kListType, v);
    return std::nullopt;
  }
  std::vector<int64_t> out;
  bool ok = true;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto x = coerce_int(v[i], child(loc, std::to_string(i)), issues);
    if (x) out.push_back(*x);
    else ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> coerce_string_list(const Json& v, const Loc& loc,
                                                           std::vector<ValidationIssue>& issues) {
  if (!v.is_array()) {
    add_issue(issues, "list_type", loc, kListType, v);
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto x = coerce_string(v[i], child(loc, std::to_string(i)), issues);
    if (x) out.push_back(*x);
    else ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

bool is_strict_int(const Json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

bool is_strict_int_list(const Json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return is_strict_int(e); });
}

bool is_strict_string_list(const Json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_string(); });
}

const Json* BodyReader::raw(const std::string& key) {
  known_.insert(key);
  auto it = body_.find(key);
  return it == body_.end() ? nullptr : &*it;
}

namespace {

// Null handling shared by the typed readers.
template <typename F>
auto read_field(BodyReader& reader, const std::string& key, bool nullable, const char* null_type,
                const char* null_msg, F convert) -> decltype(convert(Json(), Loc())) {
  const Json* v = reader.raw(key);
  if (!v) return std::nullopt;
  const Loc loc{"body", key};
  if (v->is_null()) {
    if (!nullable) add_issue(reader.issues(), null_type, loc, null_msg, *v);
    return std::nullopt;
  }
  return convert(*v, loc);
}

}  // namespace

std::optional<bool> BodyReader::bool_field(const std::string& key, bool nullable) {
  return read_field(*this, key, nullable, "bool_type", kBoolType,
                    [&](const Json& v, const Loc& loc) { return coerce_bool(v, loc, issues_); });
}

std::optional<int64_t> BodyReader::int_field(const std::string& key, bool nullable) {
  return read_field(*this, key, nullable, "int_type", kIntType,
                    [&](const Json& v, const Loc& loc) { return coerce_int(v, loc, issues_); });
}

std::optional<double> BodyReader::float_field(const std::string& key, bool nullable) {
  return read_field(*this, key, nullable, "float_type", kFloatType,
                    [&](const Json& v, const Loc& loc) { return coerce_float(v, loc, issues_); });
}

std::optional<std::string> BodyReader::string_field(const std::string& key, bool nullable) {
  return read_field(*this, key, nullable, "string_type", kStringType,
                    [&](const Json& v, const Loc& loc) { return coerce_string(v, loc, issues_); });
}

std::optional<std::vector<int64_t>> BodyReader::int_list_field(const std::string& key, bool nullable) {
  return read_field(*this, key, nullable, "list_type", kListType,
                    [&](const Json& v, const Loc& loc) { return coerce_int_list(v, loc, issues_); });
}

std::optional<std::vector<std::string>> BodyReader::string_list_field(const std::string& key,
                                                                      bool nullable) {
  return read_field(*this, key, nullable, "list_type", kListType, [&](const Json& v, const Loc& loc) {
    return coerce_string_list(v, loc, issues_);
  });
}

std::optional<std::vector<std::pair<std::string, double>>> BodyReader::float_dict_field(
    const std::string& key) {
  const Json* v = raw(key);
  if (!v || v->is_null()) return std::nullopt;
  const Loc loc{"body", key};
  if (!v->is_object()) {
    add_issue(issues_, "dict_type", loc, kDictType, *v);
    return std::nullopt;
  }
  std::vector<std::pair<std::string, double>> out;
  bool ok = true;
  for (const auto& [k, e] : v->items()) {
    auto x = coerce_float(e, child(loc, k), issues_);
    if (x) out.emplace_back(k, *x);
    else ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<Json> BodyReader::object_field(const std::string& key) {
  const Json* v = raw(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_object()) {
    add_issue(issues_, "dict_type", Loc{"body", key}, kDictType, *v);
    return std::nullopt;
  }
  return *v;
}

std::vector<std::string> BodyReader::unknown_fields() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : body_.items()) {
    if (!known_.count(k)) out.push_back(k);
  }
  return out;
}

void BodyReader::throw_if_issues() const {
  if (!issues_.empty()) throw ApiException(request_validation_error(issues_));
}

std::string ignored_fields_warning(const std::vector<std::string>& fields) {
  // A log line per request: keys and their number are the client's, so both are bounded.
  constexpr std::size_t kMaxListedFields = 32;
  std::string set = "{";
  for (std::size_t i = 0; i < fields.size() && i < kMaxListedFields; ++i) {
    if (i) set += ", ";
    set += py_str_repr(echo_input(fields[i]));
  }
  if (fields.size() > kMaxListedFields) {
    set += ", ...and " + std::to_string(fields.size() - kMaxListedFields) + " more";
  }
  return "The following fields were present in the request but ignored: " + set + "}";
}

ValidationIssue missing_field_issue(const std::string& key, const Json& body) {
  ValidationIssue issue;
  issue.type = "missing";
  issue.loc = {"body", key};
  issue.msg = "Field required";
  issue.input = body;
  return issue;
}

}  // namespace fp4serve::server::openai
