// A compiled Jinja template with jinja2 semantics as transformers configures them
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, autoescape off).
//
// Sandbox: templates can reach no files, network, or host objects -- only the values passed in and
// the builtins. Rendering is bounded by TemplateLimits; exceeding one throws TemplateLimitError.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace fp4serve::jinja {

struct TemplateLimits {
  std::size_t max_loop_iterations = 1'000'000;      // summed over all loops in one render
  int max_recursion_depth = 100;                     // nested macro calls
  std::size_t max_output_bytes = 64u * 1024 * 1024;  // any rendered text or built string
  int max_nesting = 200;                             // syntactic nesting of blocks/expressions
  int max_eval_depth = 2000;                         // nested evaluation steps (bounds stack use)
};

class Template {
 public:
  // Compiles the template. Throws TemplateSyntaxError (with line/column).
  explicit Template(std::string source, TemplateLimits limits = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the members of `context` (a JSON object) as template variables.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const = delete;  // sorted keys would change tojson output
  // Renders with prepared variables (lets callers pass values JSON cannot express).
  std::string render(const Dict& variables) const;

  const TemplateLimits& limits() const { return limits_; }

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  TemplateLimits limits_;
};

}  // namespace fp4serve::jinja
