#include "server/openai/python_repr.h"

#include <algorithm>
#include <cstdio>

#include "engine/sampling_params.h"

namespace fp4serve::server::openai {

std::string py_str_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

namespace {

std::string number_str(const nlohmann::ordered_json& v) {
  if (v.is_number_float()) return engine::python_float_repr(v.get<double>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  return std::to_string(v.get<int64_t>());
}

}  // namespace

std::string py_repr(const nlohmann::ordered_json& v) {
  if (v.is_string()) return py_str_repr(v.get_ref<const std::string&>());
  return py_str(v);
}

std::string py_str(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "None";
    case nlohmann::json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case nlohmann::json::value_t::string: return v.get<std::string>();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return number_str(v);
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(e);
      }
      return out + "]";
    }
    case nlohmann::json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k) + ": " + py_repr(e);
      }
      return out + "}";
    }
    default: return "None";
  }
}

std::string py_int_list(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

std::size_t py_len(std::string_view utf8) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < utf8.size();) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    if (i + len > utf8.size()) len = 1;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(utf8[i + k]) & 0xc0) != 0x80) {
        len = 1;
        break;
      }
    }
    i += len;
    ++n;
  }
  return n;
}

std::string PythonJsonError::str() const {
  return msg + ": line " + std::to_string(lineno) + " column " + std::to_string(colno) + " (char " +
         std::to_string(pos) + ")";
}

std::optional<PythonJsonError> python_json_decode_error(std::string_view text) {
  try {
    const auto parsed = nlohmann::ordered_json::parse(text);
    (void)parsed;
    return std::nullopt;
  } catch (const nlohmann::ordered_json::exception& e) {  // parse_error, or out_of_range for 1e309
    return python_json_decode_error(text, e);
  }
}

PythonJsonError python_json_decode_error(std::string_view text, const nlohmann::ordered_json::exception& error) {
  const std::string what = error.what();
  std::size_t byte = 0;
  if (const auto* parse = dynamic_cast<const nlohmann::ordered_json::parse_error*>(&error)) {
    byte = parse->byte;
  } else {
    // A number past double's range (1e309): Python's json reads it as inf, nlohmann refuses it
    // (out_of_range.406 "number overflow parsing '1e309'", without its place). Refused as malformed
    // at the literal's first occurrence.
    const auto open = what.find('\''), close = what.rfind('\'');
    if (open < close) byte = text.find(what.substr(open + 1, close - open - 1)) + 1;  // npos + 1 == 0
  }
  PythonJsonError err;
  std::size_t at = byte > 0 ? byte - 1 : 0;  // nlohmann: 1-based index of the offending byte
  auto has = [&](const char* s) { return what.find(s) != std::string::npos; };
  if (has("number overflow")) {
    err.msg = "Out of range float values are not JSON compliant";  // Python's words for inf in JSON
  } else if (has("; expected end of input")) {
    err.msg = "Extra data";
  } else if (has("while parsing object key")) {
    err.msg = "Expecting property name enclosed in double quotes";
  } else if (has("while parsing object separator")) {
    err.msg = "Expecting ':' delimiter";
  } else if (has("; expected ']'") || has("; expected '}'")) {
    err.msg = "Expecting ',' delimiter";
  } else if (has("missing closing quote")) {
    err.msg = "Unterminated string starting at";
    const auto quote = text.rfind('"', at > 0 ? at - 1 : 0);
    if (quote != std::string_view::npos) at = quote;
  } else {
    err.msg = "Expecting value";
  }
  if (at > text.size()) at = text.size();
  const std::string_view head = text.substr(0, at);
  err.pos = py_len(head);
  const auto nl = head.rfind('\n');
  err.lineno = 1 + static_cast<std::size_t>(std::count(head.begin(), head.end(), '\n'));
  err.colno = nl == std::string_view::npos ? err.pos + 1 : py_len(head.substr(nl + 1)) + 1;
  return err;
}

}  // namespace fp4serve::server::openai
