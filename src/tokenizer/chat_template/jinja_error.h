// Errors raised while compiling or rendering a Jinja chat template.
//
// Every error carries the template position (1-based line and column) so that a broken template
// or a request that trips a template check can be diagnosed from the message alone.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace fp4serve::jinja {

// A position inside the (newline-normalised) template source.
struct SourcePos {
  std::size_t line = 0;    // 1-based; 0 = unknown
  std::size_t column = 0;  // 1-based, in Unicode code points
};

// Base of all template errors. what() = "<kind> at line L, column C: <message>".
class TemplateError : public std::runtime_error {
 public:
  TemplateError(const std::string& kind, const std::string& message, SourcePos pos)
      : std::runtime_error(format(kind, message, pos)), message_(message), pos_(pos) {}

  const std::string& message() const { return message_; }
  SourcePos pos() const { return pos_; }

 private:
  static std::string format(const std::string& kind, const std::string& message, SourcePos pos) {
    if (pos.line == 0) return kind + ": " + message;
    return kind + " at line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": " +
           message;
  }
  std::string message_;
  SourcePos pos_;
};

// The template text is not valid Jinja (or uses a feature this engine does not support).
class TemplateSyntaxError : public TemplateError {
 public:
  TemplateSyntaxError(const std::string& message, SourcePos pos)
      : TemplateError("template syntax error", message, pos) {}
};

// Rendering failed: type error, undefined value used, unsafe access (Python's TypeError,
// UndefinedError, SecurityError in jinja2).
class TemplateRuntimeError : public TemplateError {
 public:
  TemplateRuntimeError(const std::string& message, SourcePos pos)
      : TemplateError("template error", message, pos) {}
};

// The template called raise_exception(message). message() is exactly the template's text, as
// transformers' jinja2.exceptions.TemplateError(message) carries it.
class TemplateRaisedError : public TemplateError {
 public:
  TemplateRaisedError(const std::string& message, SourcePos pos)
      : TemplateError("template raised exception", message, pos) {}
};

// A sandbox limit (loop iterations, recursion depth, output size) was exceeded.
class TemplateLimitError : public TemplateError {
 public:
  TemplateLimitError(const std::string& message, SourcePos pos)
      : TemplateError("template limit exceeded", message, pos) {}
};

}  // namespace fp4serve::jinja
