#include "server/routes/chat_prompt.h"

#include "server/openai/openai_error.h"

namespace fp4serve::server {

std::string render_chat_prompt(const ServingContext& ctx, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               bool continue_final_message, const nlohmann::ordered_json& template_kwargs,
                               const std::optional<std::string>& request_template) {
  using openai::ApiException;
  const bool own_template = request_template && !request_template->empty();
  if (!ctx.chat_template && !own_template) {
    throw ApiException(openai::value_error(
        "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template "
        "if the tokenizer does not define one."));
  }
  try {
    const auto context =
        make_chat_template_context(messages, tools, add_generation_prompt, ctx.special_tokens, template_kwargs);
    // A request's template is compiled here, inside the try: its syntax errors are 400s too.
    std::optional<ChatTemplate> compiled;
    if (own_template) compiled.emplace(*request_template);
    std::string text = (compiled ? *compiled : *ctx.chat_template).render(context);
    if (continue_final_message && !messages.empty()) {
      const auto& last = messages.back();
      if (last.contains("content") && last["content"].is_string()) {
        const std::string final_text = last["content"].get<std::string>();
        const size_t at = text.rfind(final_text);
        if (at != std::string::npos) text.resize(at + final_text.size());
      }
    }
    return text;
  } catch (const ChatTemplateError& e) {
    throw ApiException(openai::value_error(e.what()));
  } catch (const std::invalid_argument& e) {
    throw ApiException(openai::value_error(e.what()));
  }
}

}  // namespace fp4serve::server
