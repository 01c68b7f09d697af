// The request side of structured output, on both endpoints: vLLM's `structured_outputs` extension
// and OpenAI's `response_format`, read with pydantic's rules and merged the way vLLM's
// to_sampling_params merges them (structured_outputs_from_response_format, then
// StructuredOutputsParams.__post_init__), then checked by building the grammar
// (engine::structured_outputs_error) so a bad schema, regex or grammar is a 400 before the engine
// sees it [vllm: entrypoints/generate/base/protocol.py, sampling_params.py,
// v1/structured_output/backend_xgrammar.py validate_xgrammar_grammar]. docs/vllm-surface.md §1.4.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/structured/structured_output_params.h"
#include "server/openai/request_fields.h"

namespace fp4serve::server::openai {

// vLLM's StructuredOutputsParams dataclass as the client sent it: every constraint nullable, so
// the "exactly one constraint" rule can count them as vLLM does (`is not None`).
struct RequestStructuredOutputs {
  std::optional<Json> json;  // a schema object, or its JSON text (str | dict)
  std::optional<std::string> regex;
  std::optional<std::vector<std::string>> choice;
  std::optional<std::string> grammar;
  std::optional<bool> json_object;
  bool disable_any_whitespace = false;
  bool disable_additional_properties = false;
  std::optional<std::string> whitespace_pattern;
  std::optional<std::string> structural_tag;

  // Python's repr of the dataclass's __dict__, as vLLM's __post_init__ messages print it.
  std::string dict_repr() const;
  int constraint_count() const;
};

// response_format: {"type": "text" | "json_object" | "json_schema" | "structural_tag", ...}.
struct RequestResponseFormat {
  std::string type;
  std::optional<Json> schema;  // json_schema.schema (None when json_schema has none)
};

// Field readers (pydantic validation). Type faults go to the reader; __post_init__'s "exactly one
// constraint" rule on `structured_outputs` is a pydantic value_error at body.structured_outputs.
std::optional<RequestStructuredOutputs> read_structured_outputs(BodyReader& reader);
std::optional<RequestResponseFormat> read_response_format(BodyReader& reader);

// structured_outputs_from_response_format: `response_format` (other than text) overrides one field
// of `structured_outputs` (dataclasses.replace, which re-runs the exactly-one check). Throws
// ApiException: vLLM's 400 for a conflict or no constraint, fp4serve's for structural_tag.
std::optional<RequestStructuredOutputs> merge_response_format(
    const std::optional<RequestStructuredOutputs>& structured_outputs,
    const std::optional<RequestResponseFormat>& response_format);

// The engine's form of a merged constraint, checked by building its grammar (vLLM's
// validate_xgrammar_grammar, which the InputProcessor runs after the sampling checks). Throws
// ApiException (400) naming the problem.
engine::StructuredOutputsParams to_engine_structured_outputs(const RequestStructuredOutputs& so);

}  // namespace fp4serve::server::openai
