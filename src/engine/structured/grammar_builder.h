// From a request's constraint to xgrammar's objects, the way vLLM's xgrammar backend builds them
// (vllm/v1/structured_output/backend_xgrammar.py compile_grammar): a JSON schema with free whitespace
// unless disabled and xgrammar's strict mode (no properties the schema does not name), json_object as
// the schema {"type": "object"}, EBNF grammars with root rule "root", regexes, and a choice as the
// grammar root ::= "a" | "b" (vLLM choice_as_grammar, with newlines escaped too). The messages are
// vLLM's (validate_xgrammar_grammar) with xgrammar's reason after them; like vLLM, schemas with
// keywords xgrammar would silently ignore are refused. Two deliberate differences: free whitespace
// is bounded (kMaxJsonWhitespace per gap), and nesting is bounded (kMaxSchemaNesting).
#pragma once

#include <stdexcept>
#include <string>

#include <xgrammar/xgrammar.h>

#include "engine/structured/structured_output_params.h"

namespace fp4serve::engine {

// JSON nesting levels ([ and {) a json schema may have (about 30 levels of nested objects).
inline constexpr std::size_t kMaxSchemaNesting = 96;
// Characters of free whitespace per gap of a JSON constraint (grammar_builder.cpp says why).
inline constexpr int kMaxJsonWhitespace = 32;

// A constraint xgrammar cannot build; what() is the client message.
class GrammarSpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The grammar of the constraint, without the tokenizer (cheap: the server validates with it).
// Throws GrammarSpecError.
xgrammar::Grammar build_grammar(const StructuredOutputsParams& params);

// The EBNF of a choice constraint.
std::string choice_grammar(const std::vector<std::string>& choice);

}  // namespace fp4serve::engine
