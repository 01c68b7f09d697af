#include "server/routes/route_support.h"

#include <ctime>

#include <spdlog/spdlog.h>

namespace fp4serve::server {

void respond_json(const std::shared_ptr<http::Exchange>& ex, int status, const std::string& body) {
  http::HttpResponse r;
  r.status = status;
  r.body = body;
  ex->respond(std::move(r));
}

void respond_error(const std::shared_ptr<http::Exchange>& ex, const openai::ApiError& error) {
  respond_json(ex, error.status, error.body());
}

openai::ApiError engine_rejection_error(const engine::EngineRejected& e) {
  openai::ApiError err;
  if (e.reason() == engine::EngineRejected::Reason::kInvalid) {
    err.status = 400;
    err.type = "BadRequestError";
  } else {
    err.status = 503;
    err.type = "ServiceUnavailableError";
  }
  err.message = e.what();
  return err;
}

void respond_engine_rejection(const std::shared_ptr<http::Exchange>& ex, const engine::EngineRejected& e) {
  const openai::ApiError err = engine_rejection_error(e);
  http::HttpResponse r;
  r.status = err.status;
  r.body = err.body();
  if (err.status == 503) r.headers.push_back({"Retry-After", std::to_string(kRetryAfterSeconds)});
  ex->respond(std::move(r));
}

openai::ApiError internal_error(const std::string& detail) {
  spdlog::error("request failed: {}", detail);
  openai::ApiError err;
  err.status = 500;
  err.type = "InternalServerError";
  err.message = "Internal server error";
  return err;
}

openai::ApiError engine_output_error(const engine::RequestOutput& out) {
  if (!out.error_is_shutdown) return internal_error(out.error.value_or("engine error"));
  return openai::ApiError{503, "ServiceUnavailableError",
                          "The server is shutting down: this request was stopped before it finished "
                          "(--shutdown-timeout passed)",
                          std::nullopt};
}

openai::ResponseContext make_response_context(const ServingContext& ctx, const http::Exchange& ex,
                                              const std::string& id_prefix,
                                              const std::optional<std::string>& body_request_id,
                                              const std::string& model_name) {
  openai::ResponseContext r;
  const auto header_id = ex.request().header("X-Request-Id");
  r.id = openai::make_response_id(id_prefix,
                                  header_id ? std::optional<std::string>(std::string(*header_id)) : std::nullopt,
                                  body_request_id);
  r.created = static_cast<int64_t>(std::time(nullptr));
  r.model = model_name;
  r.tokenizer = ctx.tokenizer.get();
  r.enable_prompt_tokens_details = ctx.options.enable_prompt_tokens_details;
  r.force_include_usage = ctx.options.enable_force_include_usage;
  r.return_tokens_as_token_ids = ctx.options.return_tokens_as_token_ids;
  r.emit_reasoning_content = ctx.options.emit_reasoning_content;
  return r;
}

}  // namespace fp4serve::server
