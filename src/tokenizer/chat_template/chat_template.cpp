#include "tokenizer/chat_template/chat_template.h"

#include <stdexcept>

namespace fp4serve {

nlohmann::ordered_json make_chat_template_context(const nlohmann::ordered_json& messages,
                                                  const nlohmann::ordered_json& tools,
                                                  bool add_generation_prompt,
                                                  const nlohmann::ordered_json& special_tokens,
                                                  const nlohmann::ordered_json& template_kwargs) {
  if (!messages.is_array()) throw std::invalid_argument("chat template: messages must be an array");
  if (!tools.is_null() && !tools.is_array()) throw std::invalid_argument("chat template: tools must be an array or null");
  if (!special_tokens.is_null() && !special_tokens.is_object())
    throw std::invalid_argument("chat template: special tokens must be an object");
  if (!template_kwargs.is_null() && !template_kwargs.is_object())
    throw std::invalid_argument("chat template: template kwargs must be an object");
  // {**special_tokens_map, **kwargs}, then the named arguments of Template.render().
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (special_tokens.is_object())
    for (auto it = special_tokens.begin(); it != special_tokens.end(); ++it) ctx[it.key()] = it.value();
  if (template_kwargs.is_object()) {
    for (auto it = template_kwargs.begin(); it != template_kwargs.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        throw std::invalid_argument("chat template kwargs may not set '" + k + "'");
      ctx[k] = it.value();
    }
  }
  ctx["messages"] = messages;
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  return ctx;
}

std::string render_chat_template(const std::string& template_source, const nlohmann::ordered_json& context,
                                 const ChatTemplateLimits& limits) {
  return ChatTemplate(template_source, limits).render(context);
}

}  // namespace fp4serve
