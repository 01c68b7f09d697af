// The `serve` flags that shape the HTTP transport rather than the engine: TLS, CORS, --root-path and
// --uds, with vLLM's names, types and defaults (vllm/entrypoints/openai/cli_args.py FrontendArgs;
// docs/vllm-surface.md §2.1). `serve` and `doctor` register the same flags, so a vLLM command line
// works unchanged with both and doctor reports what serve would refuse.
#pragma once

#include <string>

#include "server/http/cors_policy.h"
#include "server/http/tls_settings.h"

namespace CLI {
class App;
}

namespace fp4serve::tools {

// As typed on the command line (the CORS lists are JSON text, as vLLM parses them with json.loads).
struct TransportFlags {
  std::string ssl_keyfile;
  std::string ssl_certfile;
  std::string ssl_ca_certs;
  int ssl_cert_reqs = 0;
  std::string ssl_ciphers;
  bool enable_ssl_refresh = false;
  std::string allowed_origins = R"(["*"])";
  std::string allowed_methods = R"(["*"])";
  std::string allowed_headers = R"(["*"])";
  bool allow_credentials = false;
  std::string root_path;
  std::string uds;
};
void add_transport_flags(CLI::App& cmd, TransportFlags& flags);

struct TransportSettings {
  http::TlsSettings tls;
  http::CorsSettings cors;
  std::string root_path;
  std::string uds;
};

// Parses the CORS lists and loads the TLS files once (no model needed, so serve runs it before the
// load). Throws std::runtime_error naming the flag (and the file, for TLS: http::TlsConfigError).
TransportSettings resolve_transport_flags(const TransportFlags& flags);

}  // namespace fp4serve::tools
