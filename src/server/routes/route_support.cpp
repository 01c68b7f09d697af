#include "server/routes/route_support.h"

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

}  // namespace fp4serve::server
