// --root-path as vLLM's FastAPI(root_path=...) routes it (Starlette's get_route_path): requests
// answer with and without the prefix, the prefix must end at a path segment, and the API-key check
// sees the path without it.
#include <gtest/gtest.h>

#include "http_test_support.h"
#include "server/http/request_target.h"

namespace fp4serve::http {
namespace {

using testing::RawClient;
using testing::test_config;
using testing::text_response;

TEST(RoutePath, StripsTheRootPathOnlyAtASegmentBoundary) {
  EXPECT_EQ(route_path("/proxy/v1/models", "/proxy"), "/v1/models");
  EXPECT_EQ(route_path("/v1/models", "/proxy"), "/v1/models");  // no prefix: routed as it is
  EXPECT_EQ(route_path("/proxy", "/proxy"), "");                // the root alone matches no route
  EXPECT_EQ(route_path("/proxyv1/models", "/proxy"), "/proxyv1/models");
  EXPECT_EQ(route_path("/proxy/", "/proxy"), "/");
  EXPECT_EQ(route_path("/a/b/v1", "/a/b"), "/v1");
  // A trailing slash on the root path strips nothing (Starlette compares the next character).
  EXPECT_EQ(route_path("/proxy/v1/models", "/proxy/"), "/proxy/v1/models");
  EXPECT_EQ(route_path("/v1/models", ""), "/v1/models");
}

TEST(HttpServerRootPath, RoutesAnswerUnderTheRootPathAndWithoutIt) {
  HttpServerConfig cfg = test_config();
  cfg.root_path = "/llm";
  cfg.api_keys = {"sk-test"};
  Router router;
  router.get("/v1/models", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, ex->request().path)); });
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, "")); });
  HttpServer server(cfg, router);
  server.start();
  RawClient client(server.port());
  const std::string key = "Authorization: Bearer sk-test\r\n";
  auto prefixed = client.request("GET", "/llm/v1/models?x=1", {}, key);
  EXPECT_EQ(prefixed.status, 200);
  EXPECT_EQ(prefixed.body, "/v1/models");  // handlers see the route path
  EXPECT_EQ(client.request("GET", "/v1/models", {}, key).status, 200);
  EXPECT_EQ(client.request("GET", "/llm/health").status, 200);
  EXPECT_EQ(client.request("GET", "/llm").status, 404);
  EXPECT_EQ(client.request("GET", "/llmv1/models", {}, key).status, 404);
  // The key guards /v1 under the prefix as well.
  EXPECT_EQ(client.request("GET", "/llm/v1/models").status, 401);
  EXPECT_EQ(client.request("GET", "/v1/models").status, 401);
}

}  // namespace
}  // namespace fp4serve::http
