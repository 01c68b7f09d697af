// The request's side of chat templating (docs/vllm-surface.md §4.5): whether a request may bring
// its own chat_template (--trust-request-chat-template), and which of its chat_template_kwargs
// become template variables. Shared by /v1/chat/completions and /tokenize's chat form.
#pragma once

#include <optional>

#include "server/openai/request_common.h"

namespace fp4serve::server::openai {

// The request's chat_template / chat_template_kwargs against --trust-request-chat-template
// [vllm: entrypoints/openai/engine/serving.py _validate_chat_template]: without the flag, a
// template in either place (even "") is refused with vLLM's 400.
void check_request_chat_template(const Json& body, const std::optional<Json>& user_kwargs, const ServerLimits& limits);

// The template kwargs after merging, as vLLM's resolve_chat_template_kwargs takes them
// [vllm: renderers/hf.py]: `chat_template` and `tokenize` are apply_chat_template's own arguments
// and refused with vLLM's 400, flag or not; the other named arguments (messages, tools, ...) are
// dropped.
Json template_variables(Json merged_kwargs);

}  // namespace fp4serve::server::openai
