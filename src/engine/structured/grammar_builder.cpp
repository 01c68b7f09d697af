#include "engine/structured/grammar_builder.h"

#include <algorithm>
#include <exception>

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

xgrammar::Grammar build(const StructuredOutputsParams& p) {
  using Kind = StructuredOutputsParams::Kind;
  const bool any_whitespace = !p.disable_any_whitespace;
  if (p.kind == Kind::kJson) {
    if (const std::size_t depth = json_depth(p.spec); depth > kMaxSchemaNesting)
      throw GrammarSpecError("the schema is nested " + std::to_string(depth) + " levels deep; at most " +
                             std::to_string(kMaxSchemaNesting) + " are accepted");
  }
  switch (p.kind) {
    case Kind::kJson:
      return xgrammar::Grammar::FromJSONSchema(p.spec, any_whitespace);
    case Kind::kJsonObject:
      return xgrammar::Grammar::FromJSONSchema(R"({"type": "object"})", any_whitespace);
    case Kind::kRegex:
      return xgrammar::Grammar::FromRegex(p.spec);
    case Kind::kChoice:
      return xgrammar::Grammar::FromEBNF(choice_grammar(p.choice));
    case Kind::kGrammar:
      return xgrammar::Grammar::FromEBNF(p.spec);
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
  if (params.kind == StructuredOutputsParams::Kind::kChoice && params.choice.empty())
    throw GrammarSpecError("The choice list of structured outputs must not be empty.");
  try {
    return build(params);
  } catch (const GrammarSpecError&) {
    throw;
  } catch (const std::exception& e) {
    throw GrammarSpecError(client_message(e.what()));
  }
}

}  // namespace fp4serve::engine
