// The OpenAI-compatible routes on the HTTP router: /v1/completions, /v1/chat/completions,
// /v1/models, /tokenize, /detokenize, /version, /health, /ping, /metrics (and the debug switches
// when enabled). Each handler parses and validates on the io thread, submits to the engine and
// answers from the engine's notifier.
#pragma once

#include "server/http/router.h"
#include "server/routes/serving_context.h"

namespace fp4serve::server {

void register_openai_routes(http::Router& router, const ServingContext& context);

// Shared by the generation routes.
void register_completion_route(http::Router& router, const ServingContext& context);
void register_chat_route(http::Router& router, const ServingContext& context);
void register_info_routes(http::Router& router, const ServingContext& context);

}  // namespace fp4serve::server
