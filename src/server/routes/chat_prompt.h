// The prompt text of a chat: the chat template rendered as transformers' apply_chat_template does,
// trimmed after the final message for continue_final_message (vLLM). Template faults become 400s.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/routes/serving_context.h"

namespace fp4serve::server {

std::string render_chat_prompt(const ServingContext& ctx, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               bool continue_final_message, const nlohmann::ordered_json& template_kwargs);

}  // namespace fp4serve::server
