#include "server/http/error_bodies.h"

#include <nlohmann/json.hpp>

#include "server/http/status_line.h"

namespace fp4serve::http {

std::string detail_error_body(std::string_view detail) {
  return nlohmann::json{{"detail", detail}}.dump();
}

std::string unauthorized_error_body() { return R"({"error":"Unauthorized"})"; }

std::string envelope_error_body(int status, std::string_view message) {
  nlohmann::json error = {{"message", message},
                          {"type", reason_phrase(status)},
                          {"param", nullptr},
                          {"code", status}};
  // dump() replaces invalid UTF-8 instead of throwing: messages may quote client bytes.
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                         nlohmann::json::error_handler_t::replace);
}

}  // namespace fp4serve::http
