#include "server/openai/tool_parser_qwen3_coder_markup.h"

#include "server/openai/tool_parser_values.h"

namespace fp4serve::server::openai::qwen3_coder {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view lstrip(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::size_t next_structural_param_start(std::string_view text, std::size_t from, const NameSet* valid) {
  std::size_t i = from;
  while (true) {
    i = text.find(kParameterPrefix, i);
    if (i == npos) return npos;
    if (i == 0 || text[i - 1] == '\n') {
      if (valid == nullptr) return i;
      const std::size_t name_end = text.find('>', i + kParameterPrefix.size());
      if (name_end != npos) {
        const std::string_view name = text.substr(i + kParameterPrefix.size(), name_end - i - kParameterPrefix.size());
        if (valid->count(name) != 0) return i;
      }
    }
    ++i;
  }
}

std::size_t find_true_param_end(std::string_view value_text, const NameSet* valid, bool require_lookahead) {
  int depth = 0;
  std::size_t pos = 0;
  while (pos < value_text.size()) {
    // Depth counts every structural open, known name or not: a literal nested tool call may use
    // names outside the schema, and its </parameter> must pair with its own open.
    const std::size_t next_open = next_structural_param_start(value_text, pos, nullptr);
    const std::size_t next_close = value_text.find(kParameterEnd, pos);
    if (next_close == npos) return npos;
    if (next_open != npos && next_open < next_close) {
      ++depth;
      pos = next_open + kParameterPrefix.size();
    } else if (depth == 0) {
      const std::string_view after = lstrip(value_text.substr(next_close + kParameterEnd.size()));
      bool next_param = false;
      if (starts_with(after, kParameterPrefix)) {
        if (valid != nullptr) {
          const std::size_t name_end = after.find('>', kParameterPrefix.size());
          if (name_end != npos) {
            next_param = valid->count(after.substr(kParameterPrefix.size(), name_end - kParameterPrefix.size())) != 0;
          }
        } else {
          next_param = true;
        }
      }
      if ((after.empty() && !require_lookahead) || next_param || starts_with(after, kFunctionEnd) ||
          starts_with(after, kToolCallEnd)) {
        return next_close;
      }
      pos = next_close + kParameterEnd.size();
    } else {
      --depth;
      pos = next_close + kParameterEnd.size();
    }
  }
  return npos;
}

std::size_t find_true_function_end(std::string_view text) {
  std::size_t from = 0;
  while (true) {
    const std::size_t i = text.find(kFunctionEnd, from);
    if (i == npos) return npos;
    const std::string_view after = lstrip(text.substr(i + kFunctionEnd.size()));
    if (after.empty() || starts_with(after, kToolCallEnd)) return i;
    from = i + kFunctionEnd.size();
  }
}

std::size_t scan_to_structural_function_end(std::string_view body, const NameSet* valid) {
  std::size_t pos = 0;
  const std::size_t n = body.size();
  NameSet seen;
  while (pos < n) {
    while (pos < n && (body[pos] == ' ' || body[pos] == '\t' || body[pos] == '\n' || body[pos] == '\r')) ++pos;
    if (pos >= n) return npos;
    const std::string_view rest = body.substr(pos);
    if (starts_with(rest, kFunctionEnd)) return pos;
    if (!starts_with(rest, kParameterPrefix)) {
      // Free text before </function>: fall back to the plain lookahead rule on the rest.
      const std::size_t end = find_true_function_end(rest);
      return end == npos ? npos : pos + end;
    }
    const std::size_t name_end = body.find('>', pos + kParameterPrefix.size());
    if (name_end == npos) return npos;
    const std::string name(body.substr(pos + kParameterPrefix.size(), name_end - pos - kParameterPrefix.size()));
    std::size_t value_start = name_end + 1;
    if (value_start < n && body[value_start] == '\n') ++value_start;
    const std::size_t param_end = find_true_param_end(body.substr(value_start), valid, /*require_lookahead=*/true);
    if (param_end == npos) {
      // A missing </parameter>: the next structural <parameter=NAME> with a NAME not used yet
      // ends this value implicitly.
      std::optional<NameSet> unseen;
      if (valid != nullptr) {
        unseen.emplace();
        for (const auto& v : *valid) {
          if (v != name && seen.count(v) == 0) unseen->insert(v);
        }
      }
      const std::size_t implicit_end =
          next_structural_param_start(body.substr(value_start), 0, unseen ? &*unseen : nullptr);
      if (implicit_end == npos) return npos;
      pos = value_start + implicit_end;
      seen.insert(name);
      continue;
    }
    seen.insert(name);
    pos = value_start + param_end + kParameterEnd.size();
  }
  return npos;
}

std::optional<NameSet> valid_param_names(const nlohmann::ordered_json& tools, std::string_view function_name) {
  const auto props = find_tool_properties(tools, function_name);
  if (props.empty()) return std::nullopt;
  NameSet names;
  for (const auto& [key, value] : props.items()) names.insert(key);
  return names;
}

std::vector<FunctionCallSpan> function_call_strings(std::string_view out, const nlohmann::ordered_json& tools) {
  std::vector<std::string_view> raw_calls;
  std::size_t search = 0;
  while (true) {
    const std::size_t start = out.find(kToolCallStart, search);
    if (start == npos) break;
    const std::string_view after_open = out.substr(start + kToolCallStart.size());
    std::size_t end = npos;
    std::size_t inner = 0;
    while (true) {
      const std::size_t i = after_open.find(kToolCallEnd, inner);
      if (i == npos) break;
      const std::string_view after_close = lstrip(after_open.substr(i + kToolCallEnd.size()));
      if (after_close.empty() || starts_with(after_close, kToolCallStart)) {
        end = i;
        break;
      }
      inner = i + kToolCallEnd.size();
    }
    if (end == npos) {
      raw_calls.push_back(after_open);
      break;
    }
    raw_calls.push_back(after_open.substr(0, end));
    search = start + kToolCallStart.size() + end + kToolCallEnd.size();
  }
  if (raw_calls.empty()) raw_calls.push_back(out);

  std::vector<FunctionCallSpan> calls;
  for (const std::string_view raw : raw_calls) {
    const std::size_t func_start = raw.find(kFunctionPrefix);
    if (func_start == npos) continue;
    const std::string_view after_func = raw.substr(func_start + kFunctionPrefix.size());
    const std::size_t name_end = after_func.find('>');
    std::optional<NameSet> valid;
    std::size_t body_start = 0;
    if (name_end != npos) {
      valid = valid_param_names(tools, after_func.substr(0, name_end));
      body_start = name_end + 1;
    }
    const std::size_t scan_end = scan_to_structural_function_end(after_func.substr(body_start), valid ? &*valid : nullptr);
    if (scan_end != npos) {
      calls.push_back({after_func.substr(0, body_start + scan_end), true});
      continue;
    }
    const std::size_t func_end = find_true_function_end(after_func);
    calls.push_back({func_end == npos ? after_func : after_func.substr(0, func_end), false});
  }
  return calls;
}

bool is_valid_function_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    if (c == '{' || c == '}' || c == '<' || c == '>' || c == '"' || c == '\'' || c == ' ' || c == '\t' || c == '\n' ||
        c == '\r') {
      return false;
    }
  }
  return true;
}

std::optional<ParsedFunctionCall> parse_function_call(std::string_view call, const nlohmann::ordered_json& tools) {
  const std::size_t name_end = call.find('>');
  if (name_end == npos) return std::nullopt;
  ParsedFunctionCall parsed;
  parsed.name = std::string(call.substr(0, name_end));
  // An unrendered template ("<function={{ tc.name }}>") is not a tool call.
  if (!is_valid_function_name(parsed.name)) return std::nullopt;
  const auto properties = find_tool_properties(tools, parsed.name);
  const auto valid = valid_param_names(tools, parsed.name);
  const NameSet* valid_ptr = valid ? &*valid : nullptr;
  parsed.arguments = nlohmann::ordered_json::object();

  const std::string_view params = call.substr(name_end + 1);
  std::size_t pos = 0;
  while (true) {
    // Top-level parameters are not filtered by the schema (a model may rename a field).
    const std::size_t param_start = next_structural_param_start(params, pos, nullptr);
    if (param_start == npos) break;
    const std::size_t pname_start = param_start + kParameterPrefix.size();
    const std::size_t pname_end = params.find('>', pname_start);
    if (pname_end == npos) break;
    const std::string param_name(params.substr(pname_start, pname_end - pname_start));
    const std::string_view value_text = params.substr(pname_end + 1);

    std::string_view value;
    const std::size_t param_end = find_true_param_end(value_text, valid_ptr, /*require_lookahead=*/false);
    if (param_end == npos) {
      // Malformed or cut off: the next structural known parameter ends it, else </function>, else
      // the end of the text.
      const std::size_t next_param = next_structural_param_start(value_text, 0, valid_ptr);
      if (next_param != npos) {
        value = value_text.substr(0, next_param);
        pos = pname_end + 1 + next_param;
      } else {
        const std::size_t func_end = find_true_function_end(value_text);
        value = func_end != npos ? value_text.substr(0, func_end) : value_text;
        pos = params.size();
      }
    } else {
      value = value_text.substr(0, param_end);
      pos = pname_end + 1 + param_end + kParameterEnd.size();
    }
    if (starts_with(value, "\n")) value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    parsed.arguments[param_name] = convert_param_value(std::string(value), param_name, properties);
  }
  return parsed;
}

std::size_t content_end(std::string_view out) {
  std::size_t search = 0;
  while (true) {
    const std::size_t tc = out.find(kToolCallStart, search);
    if (tc == npos) break;
    const std::size_t close = out.find(kToolCallEnd, tc + kToolCallStart.size());
    const std::size_t limit = close != npos ? close : out.size();
    const std::size_t func = out.find(kFunctionPrefix, tc + kToolCallStart.size());
    if (func != npos && func + kFunctionPrefix.size() <= limit) return tc;
    search = close != npos ? close + kToolCallEnd.size() : limit;
  }
  return out.find(kFunctionPrefix);
}

}  // namespace fp4serve::server::openai::qwen3_coder
