#include "engine/structured/structured_output_params.h"

#include "engine/structured/grammar_builder.h"

namespace fp4serve::engine {

const char* to_string(StructuredOutputsParams::Kind kind) {
  using Kind = StructuredOutputsParams::Kind;
  switch (kind) {
    case Kind::kJson: return "json";
    case Kind::kJsonObject: return "json_object";
    case Kind::kRegex: return "regex";
    case Kind::kChoice: return "choice";
    case Kind::kGrammar: return "grammar";
    case Kind::kStructuralTag: return "structural_tag";
  }
  return "?";
}

std::string StructuredOutputsParams::cache_key() const {
  // Length-prefixed fields: no two different constraints share a key.
  std::string key = to_string(kind);
  auto add = [&key](const std::string& s) { key += '\x1f' + std::to_string(s.size()) + ':' + s; };
  add(spec);
  key += '\x1f' + std::to_string(choice.size());
  for (const std::string& c : choice) add(c);
  key += disable_any_whitespace ? "\x1fw1" : "\x1fw0";
  key += disable_additional_properties ? "a1" : "a0";
  if (whitespace_pattern) add(*whitespace_pattern);
  return key;
}

std::optional<std::string> structured_outputs_error(const StructuredOutputsParams& params) {
  try {
    build_grammar(params);
    return std::nullopt;
  } catch (const GrammarSpecError& e) {
    return std::string(e.what());
  }
}

}  // namespace fp4serve::engine
