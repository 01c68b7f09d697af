// JSON bodies of the errors the transport itself produces, in the shapes vLLM sends:
// - FastAPI's default for routing misses: {"detail": "Not Found"} / {"detail": "Method Not Allowed"}
//   (vLLM registers its envelope handler for fastapi.HTTPException, but Starlette's router raises
//   starlette.exceptions.HTTPException, which FastAPI's default handler answers).
// - vLLM's auth middleware: {"error": "Unauthorized"}.
// - Everything else (400, 408, 413, 431, 500, 503): vLLM's ErrorResponse envelope as built by its
//   http_exception_handler: {"error": {"message", "type": <HTTP reason phrase>, "param": null,
//   "code": <status>}}.
#pragma once

#include <string>
#include <string_view>

namespace fp4serve::http {

std::string detail_error_body(std::string_view detail);
std::string unauthorized_error_body();
std::string envelope_error_body(int status, std::string_view message);

}  // namespace fp4serve::http
