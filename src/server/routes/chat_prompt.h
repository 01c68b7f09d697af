// The prompt text of a chat: the chat template rendered as transformers' apply_chat_template does,
// trimmed after the final message for continue_final_message (vLLM). The template is the server's,
// or the request's own (--trust-request-chat-template), compiled per request by the same Jinja
// engine under the same limits. Template faults -- syntax, runtime, raise_exception, a limit --
// become 400s.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/routes/serving_context.h"

namespace fp4serve::server {

// `request_template`: the request's chat_template; nullopt or "" means the server's (vLLM's
// `request.chat_template or default_template`).
std::string render_chat_prompt(const ServingContext& ctx, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               bool continue_final_message, const nlohmann::ordered_json& template_kwargs,
                               const std::optional<std::string>& request_template = std::nullopt);

}  // namespace fp4serve::server
