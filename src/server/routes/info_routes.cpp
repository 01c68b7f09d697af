// The small routes: /v1/models, /version, /health (with the wedge watchdog), /ping, /metrics,
// /tokenize, /detokenize, and the debug switches the tests and the canary's proof use.
#include <spdlog/spdlog.h>

#include "server/openai/prompt_length.h"
#include "server/openai/response_common.h"
#include "server/openai/small_endpoints.h"
#include "server/routes/chat_prompt.h"
#include "server/routes/route_support.h"
#include "server/routes/routes.h"

namespace fp4serve::server {
namespace {

using openai::ApiException;

// 200 when ready; 503 when work is waiting or running and no token came out for the stall timeout
// (the seeds' silent wedge that vLLM's /health misses).
void handle_health(const ServingContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  if (!ctx.engine->available()) {
    openai::ApiError err;
    err.status = 503;
    err.type = "ServiceUnavailableError";
    err.message = "the engine process is restarting";
    respond_error(ex, err);
    return;
  }
  const engine::EngineStats s = ctx.engine->stats();
  const auto stalled_for = std::chrono::steady_clock::now() - s.last_progress;
  if (s.has_work && stalled_for > ctx.options.health_stall_timeout) {
    openai::ApiError err;
    err.status = 503;
    err.type = "ServiceUnavailableError";
    err.message = fmt::format(
        "engine stalled: {} running and {} waiting requests, no token produced for {:.1f} s (--health-stall-timeout "
        "{:.1f} s)",
        s.scheduler.num_running, s.scheduler.num_waiting, std::chrono::duration<double>(stalled_for).count(),
        std::chrono::duration<double>(ctx.options.health_stall_timeout).count());
    respond_error(ex, err);
    return;
  }
  http::HttpResponse r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = "";
  ex->respond(std::move(r));
}

void handle_tokenize(const ServingContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  try {
    const openai::TokenizeRequest req = openai::parse_tokenize_request(std::string_view(ex->request().body), ctx.limits, ctx.options.chat);
    std::vector<int32_t> ids;
    if (req.chat) {
      const std::string prompt = render_chat_prompt(ctx, req.messages, req.tools, req.add_generation_prompt,
                                                    req.continue_final_message, req.chat_template_kwargs,
                                                    req.chat_template);
      ids = ctx.tokenizer->encode(prompt, req.add_special_tokens);
    } else {
      ids = ctx.tokenizer->encode(req.prompt, req.add_special_tokens);
    }
    std::optional<std::vector<std::string>> strs;
    if (req.return_token_strs) {
      strs.emplace();
      for (int32_t id : ids) strs->push_back(ctx.tokenizer->id_to_token(id).value_or(""));
    }
    respond_json(ex, 200, openai::dump_json(openai::tokenize_response_json(ids, ctx.limits.max_model_len, strs)));
  } catch (const ApiException& e) {
    respond_error(ex, e.error());
  }
}

void handle_detokenize(const ServingContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  try {
    const openai::DetokenizeRequest req = openai::parse_detokenize_request(std::string_view(ex->request().body), ctx.limits);
    openai::check_prompt_token_ids(req.tokens, ctx.limits.sampling.vocab_size);
    respond_json(ex, 200, openai::dump_json(openai::detokenize_response_json(ctx.tokenizer->decode(req.tokens))));
  } catch (const ApiException& e) {
    respond_error(ex, e.error());
  }
}

}  // namespace

void register_info_routes(http::Router& router, const ServingContext& ctx) {
  router.get("/v1/models", [&ctx](std::shared_ptr<http::Exchange> ex) {
    std::vector<openai::ModelCardInfo> cards;
    for (const std::string& name : ctx.limits.served_model_names) {
      openai::ModelCardInfo c;
      c.id = name;
      c.root = ctx.options.model_root;
      c.max_model_len = ctx.limits.max_model_len;
      c.created = ctx.created_unix;
      cards.push_back(std::move(c));
    }
    respond_json(ex, 200, openai::dump_json(openai::models_list_json(cards)));
  });
  router.get("/version", [&ctx](std::shared_ptr<http::Exchange> ex) {
    respond_json(ex, 200, openai::dump_json(openai::version_json(ctx.options.version)));
  });
  router.get("/health", [&ctx](std::shared_ptr<http::Exchange> ex) { handle_health(ctx, ex); });
  router.get("/ping", [&ctx](std::shared_ptr<http::Exchange> ex) { handle_health(ctx, ex); });
  router.post("/ping", [&ctx](std::shared_ptr<http::Exchange> ex) { handle_health(ctx, ex); });
  // Any method, like vLLM's Mount of the Prometheus ASGI app: load testers probe it with HEAD.
  router.any("/metrics", [&ctx](std::shared_ptr<http::Exchange> ex) {
    http::HttpResponse r;
    r.content_type = metrics::kPrometheusContentType;
    r.body = metrics::render_engine_metrics(ctx.engine->stats(), ctx.exposition);
    ex->respond(std::move(r));
  });
  router.post("/tokenize", [&ctx](std::shared_ptr<http::Exchange> ex) { handle_tokenize(ctx, ex); });
  router.post("/detokenize", [&ctx](std::shared_ptr<http::Exchange> ex) { handle_detokenize(ctx, ex); });
  if (ctx.options.debug_endpoints) {
    // POST /debug/stall?on=1|0 freezes the engine loop (the wedge test); /debug/corrupt-gdn?on=1|0
    // zeroes the GDN state of every running sequence after each step (the canary's fault injection).
    auto on = [](const http::HttpRequest& r) { return r.query.find("on=0") == std::string::npos; };
    router.post("/debug/stall", [&ctx, on](std::shared_ptr<http::Exchange> ex) {
      ctx.engine->set_debug_stall(on(ex->request()));
      respond_json(ex, 200, "{}");
    });
    router.post("/debug/corrupt-gdn", [&ctx, on](std::shared_ptr<http::Exchange> ex) {
      ctx.engine->set_corrupt_gdn_state(on(ex->request()));
      respond_json(ex, 200, "{}");
    });
    // The engine process: its pid (tests SIGKILL it) and a crash on demand (SIGSEGV).
    router.get("/debug/engine", [&ctx](std::shared_ptr<http::Exchange> ex) {
      respond_json(ex, 200, fmt::format("{{\"pid\": {}, \"available\": {}}}", ctx.engine->engine_pid(),
                                        ctx.engine->available() ? "true" : "false"));
    });
    router.post("/debug/segfault", [&ctx](std::shared_ptr<http::Exchange> ex) {
      if (const auto why = ctx.engine->debug_segfault()) {
        openai::ApiError err;
        err.status = 400;
        err.type = "BadRequestError";
        err.message = *why;
        respond_error(ex, err);
        return;
      }
      respond_json(ex, 200, "{}");
    });
  }
}

void register_openai_routes(http::Router& router, const ServingContext& context) {
  register_completion_route(router, context);
  register_chat_route(router, context);
  register_info_routes(router, context);
}

}  // namespace fp4serve::server
