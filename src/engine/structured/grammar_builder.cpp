#include "engine/structured/grammar_builder.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

namespace fp4serve::engine {

namespace {

// An EBNF string literal's body: quotes and backslashes escaped (vLLM escape_ebnf_string), and the
// control characters a literal cannot hold raw.
std::string ebnf_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out;
}

// xgrammar's messages start "[HH:MM:SS] /path/to/file.cc:123: " (its logging prefix): the client
// gets the message alone, at most kMaxMessage bytes of it.
constexpr std::size_t kMaxMessage = 1000;
std::string client_message(std::string m) {
  if (!m.empty() && m.front() == '[') {
    const std::size_t close = m.find("] ");
    const std::size_t cc = close == std::string::npos ? close : m.find(".cc:", close);
    const std::size_t colon = cc == std::string::npos ? cc : m.find(": ", cc);
    if (colon != std::string::npos) m.erase(0, colon + 2);
  }
  if (m.size() > kMaxMessage) m = m.substr(0, kMaxMessage) + "...[truncated]";
  return m;
}

// The deepest [ / { nesting of JSON text (strings skipped). xgrammar's schema converter takes time
// cubic in the depth (measured: 128 object levels 0.18 s, 500 levels 18 s), so a client must not be
// able to send a deep one.
std::size_t json_depth(const std::string& text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    else if ((c == '}' || c == ']') && depth > 0) --depth;
  }
  return deepest;
}

// Free whitespace between JSON tokens, at most this many characters per gap (xgrammar's
// max_whitespace_cnt). vLLM leaves it unbounded; a model that loops on whitespace (small or
// undertrained ones do, and a random-weight one nearly always) then never closes its JSON before
// max_tokens. 32 characters still fit a newline and indentation 30 deep.
std::optional<int> whitespace_limit(const StructuredOutputsParams& p) {
  return p.disable_any_whitespace ? std::nullopt : std::optional<int>(kMaxJsonWhitespace);
}

// Regexes and grammars are parsed by recursive descent: bound their bracket nesting, as the
// schema's, before xgrammar sees them.
void check_bracket_depth(const std::string& text, const char* what) {
  std::size_t depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '(' || c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  if (deepest > kMaxSchemaNesting)
    throw GrammarSpecError(std::string("The ") + what + " nests brackets " + std::to_string(deepest) +
                           " levels deep; at most " + std::to_string(kMaxSchemaNesting) + " are accepted.");
}

// vLLM's has_xgrammar_unsupported_json_features: keywords xgrammar would silently ignore, so the
// output could break the schema while claiming to follow it (vLLM then falls back to another
// backend, or refuses when xgrammar was asked for; fp4serve has no other backend and refuses).
bool has_unsupported_json_features(const nlohmann::json& obj) {
  static const std::set<std::string> kFormats = {"email", "date", "time", "date-time", "duration", "ipv4", "ipv6",
                                                 "hostname", "uuid", "uri", "uri-reference", "uri-template",
                                                 "json-pointer", "relative-json-pointer"};
  if (obj.is_array()) {
    return std::any_of(obj.begin(), obj.end(), [](const nlohmann::json& v) { return has_unsupported_json_features(v); });
  }
  if (!obj.is_object()) return false;
  std::set<std::string> types;
  if (const auto t = obj.find("type"); t != obj.end()) {
    if (t->is_string()) types.insert(t->get<std::string>());
    if (t->is_array())
      for (const auto& x : *t)
        if (x.is_string()) types.insert(x.get<std::string>());
  }
  auto has = [&](const char* key) { return obj.contains(key); };
  if ((types.count("integer") || types.count("number")) && has("multipleOf")) return true;
  if (types.count("array") && (has("uniqueItems") || has("contains") || has("minContains") || has("maxContains")))
    return true;
  if (types.count("string")) {
    if (const auto f = obj.find("format"); f != obj.end() && (!f->is_string() || !kFormats.count(f->get<std::string>())))
      return true;
    // A pattern or format compiles alone: the length bounds beside it would be dropped.
    if ((has("pattern") || has("format")) && (has("minLength") || has("maxLength"))) return true;
  }
  if (types.count("object") && (has("patternProperties") || has("propertyNames"))) return true;
  for (const auto& [key, value] : obj.items()) {
    if ((value.is_object() || value.is_array()) && has_unsupported_json_features(value)) return true;
  }
  return false;
}

xgrammar::Grammar json_grammar(const StructuredOutputsParams& p) {
  if (const std::size_t depth = json_depth(p.spec); depth > kMaxSchemaNesting)
    throw GrammarSpecError("The JSON schema is nested " + std::to_string(depth) + " levels deep; at most " +
                           std::to_string(kMaxSchemaNesting) + " are accepted.");
  nlohmann::json schema;
  try {
    schema = nlohmann::json::parse(p.spec);
  } catch (const std::exception&) {
    throw GrammarSpecError("Invalid JSON grammar specification.");
  }
  if (has_unsupported_json_features(schema))
    throw GrammarSpecError("The provided JSON schema contains features not supported by xgrammar.");
  try {
    return xgrammar::Grammar::FromJSONSchema(p.spec, !p.disable_any_whitespace, std::nullopt, std::nullopt,
                                             /*strict_mode=*/true, whitespace_limit(p));
  } catch (const std::exception& e) {
    throw GrammarSpecError("Failed to transform json schema into a grammar: " + client_message(e.what()));
  }
}

xgrammar::Grammar build(const StructuredOutputsParams& p) {
  using Kind = StructuredOutputsParams::Kind;
  switch (p.kind) {
    case Kind::kJson:
      return json_grammar(p);
    case Kind::kJsonObject:
      return xgrammar::Grammar::FromJSONSchema(R"({"type": "object"})", !p.disable_any_whitespace, std::nullopt,
                                               std::nullopt, true, whitespace_limit(p));
    case Kind::kRegex:
      if (p.spec.find('\0') != std::string::npos)
        throw GrammarSpecError("structured_outputs.regex must not contain a NUL character ('\\x00')");
      check_bracket_depth(p.spec, "regex");
      try {
        return xgrammar::Grammar::FromRegex(p.spec);
      } catch (const std::exception& e) {
        throw GrammarSpecError("Failed to transform regex into a grammar: " + client_message(e.what()));
      }
    case Kind::kChoice:
      if (p.choice.empty()) throw GrammarSpecError("The choice list of structured outputs must not be empty.");
      try {
        return xgrammar::Grammar::FromEBNF(choice_grammar(p.choice));
      } catch (const std::exception& e) {
        throw GrammarSpecError("Failed to transform choices into a grammar: " + client_message(e.what()));
      }
    case Kind::kGrammar:
      check_bracket_depth(p.spec, "grammar");
      try {
        return xgrammar::Grammar::FromEBNF(p.spec);
      } catch (const std::exception& e) {
        // vLLM says only "Invalid grammar specification."; the reason helps the client more.
        throw GrammarSpecError("Invalid grammar specification: " + client_message(e.what()));
      }
    case Kind::kStructuralTag:
      break;
  }
  throw GrammarSpecError("structural_tag constraints are not supported by fp4serve");
}

}  // namespace

std::string choice_grammar(const std::vector<std::string>& choice) {
  std::string g = "root ::= ";
  for (std::size_t i = 0; i < choice.size(); ++i) {
    if (i) g += " | ";
    g += '"' + ebnf_escape(choice[i]) + '"';
  }
  return g;
}

xgrammar::Grammar build_grammar(const StructuredOutputsParams& params) {
  try {
    return build(params);
  } catch (const GrammarSpecError&) {
    throw;
  } catch (const std::exception& e) {
    throw GrammarSpecError(client_message(e.what()));
  }
}

}  // namespace fp4serve::engine
