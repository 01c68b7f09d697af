#include "engine/structured/grammar_builder.h"

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

xgrammar::Grammar build(const StructuredOutputsParams& p) {
  using Kind = StructuredOutputsParams::Kind;
  const bool any_whitespace = !p.disable_any_whitespace;
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
    throw GrammarSpecError(e.what());
  }
}

}  // namespace fp4serve::engine
