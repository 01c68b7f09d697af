// A request's structured-output constraint, as vLLM's StructuredOutputsParams (vllm/sampling_params.py)
// carries it: exactly one kind of constraint, plus vLLM's options for it. The OpenAI layer fills it
// from `structured_outputs`, `response_format` and a forced `tool_choice` (vLLM's to_sampling_params);
// the engine compiles it with xgrammar (grammar_compiler.h) and masks every row of the request after
// its reasoning ends (docs/ARCHITECTURE.md, "Structured output").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp4serve::engine {

struct StructuredOutputsParams {
  enum class Kind : std::uint8_t {
    kJson,           // `json`: a JSON schema (spec holds its JSON text)
    kJsonObject,     // `json_object`: any JSON object (spec empty)
    kRegex,          // `regex` (spec)
    kChoice,         // `choice`: exactly one of the strings in `choice`
    kGrammar,        // `grammar`: EBNF/GBNF (spec), root rule "root"
    kStructuralTag,  // `structural_tag`: xgrammar's structural-tag JSON (spec)
  };
  Kind kind = Kind::kJsonObject;
  std::string spec;
  std::vector<std::string> choice;
  bool disable_any_whitespace = false;         // JSON: no free whitespace between tokens
  bool disable_additional_properties = false;  // JSON schema: additionalProperties false by default
  std::optional<std::string> whitespace_pattern;

  // What identifies the compiled grammar (the kind, the constraint and every option): the key of
  // the compile cache, so identical constraints compile once.
  std::string cache_key() const;
};

const char* to_string(StructuredOutputsParams::Kind kind);

// The constraint's problem as a client message, or nullopt when it compiles: the grammar is built
// from the constraint (without the tokenizer, so this is cheap) exactly as the engine will build it.
// vLLM answers a failure with HTTP 400; the message names the constraint kind and xgrammar's reason.
std::optional<std::string> structured_outputs_error(const StructuredOutputsParams& params);

}  // namespace fp4serve::engine
