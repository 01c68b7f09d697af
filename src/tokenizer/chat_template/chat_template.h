// Chat template rendering with transformers' apply_chat_template semantics.
//
// transformers renders `chat_template` with jinja2 (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, its own tojson and raise_exception/strftime_now globals) and passes
// these variables: the tokenizer's special_tokens_map (bos_token, eos_token, pad_token, ...), the
// caller's extra kwargs (enable_thinking, preserve_thinking, ... = OpenAI `chat_template_kwargs`),
// then messages, tools (None when absent), documents (None) and add_generation_prompt.
// make_chat_template_context() builds exactly that variable set; render_chat_template() renders
// it. Both take nlohmann::ordered_json so that tool schemas keep their key order in tojson output.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_template.h"

namespace fp4serve {

using ChatTemplateError = jinja::TemplateError;
using ChatTemplateLimits = jinja::TemplateLimits;

// A compiled chat template; compile once per model, render per request (render is const and
// thread-safe: each call has its own evaluation state).
class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source, ChatTemplateLimits limits = {}) : tpl_(std::move(source), limits) {}
  std::string render(const nlohmann::ordered_json& context) const { return tpl_.render(context); }
  // nlohmann::json would convert implicitly but with its keys sorted, so tool schemas would print
  // in a different order than transformers prints them. Parse requests as ordered_json instead.
  std::string render(const nlohmann::json& context) const = delete;

 private:
  jinja::Template tpl_;
};

// The variables apply_chat_template passes to the template.
//   messages:        array of message objects (content may be a string, null, or a list of parts)
//   tools:           array of tool schemas, or null
//   special_tokens:  object such as {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
//   template_kwargs: object of extra variables (enable_thinking, preserve_thinking, ...); it may
//                    override special tokens but not messages/tools/documents/add_generation_prompt.
// Throws std::invalid_argument on malformed input.
nlohmann::ordered_json make_chat_template_context(const nlohmann::ordered_json& messages,
                                                  const nlohmann::ordered_json& tools,
                                                  bool add_generation_prompt,
                                                  const nlohmann::ordered_json& special_tokens,
                                                  const nlohmann::ordered_json& template_kwargs);

// Compiles and renders in one step. Throws ChatTemplateError (syntax, runtime, raise_exception,
// or limit errors, each naming line and column).
std::string render_chat_template(const std::string& template_source, const nlohmann::ordered_json& context,
                                 const ChatTemplateLimits& limits = {});
std::string render_chat_template(const std::string& template_source, const nlohmann::json& context,
                                 const ChatTemplateLimits& limits = {}) = delete;  // key order: see ChatTemplate::render
nlohmann::ordered_json make_chat_template_context(const nlohmann::json& messages, const nlohmann::json& tools,
                                                  bool add_generation_prompt, const nlohmann::json& special_tokens,
                                                  const nlohmann::json& template_kwargs) = delete;

}  // namespace fp4serve
