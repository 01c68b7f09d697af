// connection_limits.h: the default cap follows the descriptor limit, the refusal is a complete 503,
// and accept errors are rate-limited with a count of what was suppressed.
#include <sys/resource.h>

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/http/connection_limits.h"

namespace fp4serve::http {
namespace {

TEST(ConnectionLimits, DefaultCapLeavesTheReserveOfTheDescriptorLimit) {
  EXPECT_EQ(resolve_max_connections(7), 7u);
  const std::size_t limit = open_file_limit();
  if (limit == 0) {
    EXPECT_EQ(resolve_max_connections(0), 65536u);
  } else {
    EXPECT_EQ(resolve_max_connections(0), limit > kReservedFds + 16 ? limit - kReservedFds : 16u);
  }
}

TEST(ConnectionLimits, RaisingTheLimitNeverExceedsTheHardLimit) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  const std::size_t after = raise_open_file_limit(before.rlim_cur);  // a no-op target
  EXPECT_EQ(after, before.rlim_cur == RLIM_INFINITY ? 0u : static_cast<std::size_t>(before.rlim_cur));
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_LE(now.rlim_cur, now.rlim_max);
}

TEST(ConnectionLimits, RefusalIsACompleteResponseThatCloses) {
  const std::string r = connection_limit_response(70, 64);
  EXPECT_EQ(r.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("retry-after: 1\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("connection: close\r\n"), std::string::npos) << r;
  const std::string body = r.substr(r.find("\r\n\r\n") + 4);
  EXPECT_NE(r.find("content-length: " + std::to_string(body.size()) + "\r\n"), std::string::npos) << r;
  EXPECT_NE(body.find("connection limit (70 open, at most 64)"), std::string::npos) << body;
}

TEST(ConnectionLimits, RateLimitedLogCountsWhatItSuppressed) {
  std::vector<std::string> lines;
  RateLimitedLog log([&](const std::string& m) { lines.push_back(m); }, std::chrono::milliseconds(200));
  for (int i = 0; i < 1000; ++i) log.log("accept failed: Too many open files");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "accept failed: Too many open files");
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  log.log("accept failed: Too many open files");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("(999 more like it in the last"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace fp4serve::http
