#include "server/http/connection_limits.h"

#include <sys/resource.h>

#include <algorithm>

#include "server/http/error_bodies.h"
#include "server/http/status_line.h"

namespace fp4serve::http {

std::size_t open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::size_t>(rl.rlim_cur);
}

std::size_t raise_open_file_limit(std::size_t target) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < target) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? target : std::min<rlim_t>(target, rl.rlim_max);
    if (want.rlim_cur > rl.rlim_cur) setrlimit(RLIMIT_NOFILE, &want);  // best effort, as vLLM
  }
  return open_file_limit();
}

std::size_t resolve_max_connections(std::size_t configured) {
  if (configured > 0) return configured;
  const std::size_t limit = open_file_limit();
  if (limit == 0) return 65536;
  return limit > kReservedFds + 16 ? limit - kReservedFds : 16;
}

std::string connection_limit_response(std::size_t open, std::size_t max_connections) {
  const std::string body = envelope_error_body(
      503, "The server is at its connection limit (" + std::to_string(open) + " open, at most " +
               std::to_string(max_connections) + "); retry later");
  std::string bytes = serialize_head(11, 503, "application/json", {{"retry-after", "1"}},
                                     BodyFraming::content_length, body.size(), false);
  bytes += body;
  return bytes;
}

void RateLimitedLog::log(const std::string& message) {
  std::string line;
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (logged_once_ && now - last_ < interval_) {
      ++suppressed_;
      return;
    }
    line = message;
    if (suppressed_ > 0) {
      line += " (" + std::to_string(suppressed_) + " more like it in the last " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - last_).count()) + " s)";
    }
    suppressed_ = 0;
    last_ = now;
    logged_once_ = true;
  }
  if (sink_) sink_(line);
}

}  // namespace fp4serve::http
