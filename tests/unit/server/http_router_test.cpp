// Pure units of the HTTP transport: routing, API-key rules, serialization, target splitting,
// error bodies. No sockets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/http/api_key_auth.h"
#include "server/http/error_bodies.h"
#include "server/http/http_message.h"
#include "server/http/request_target.h"
#include "server/http/router.h"
#include "server/http/status_line.h"

namespace fp4serve::http {
namespace {

Handler tagged(int* hit, int tag) {
  return [hit, tag](std::shared_ptr<Exchange>) { *hit = tag; };
}

TEST(HttpRouter, ExactMatchAndMisses) {
  Router router;
  int hit = 0;
  router.get("/v1/models", tagged(&hit, 1));
  router.post("/v1/chat/completions", tagged(&hit, 2));
  router.add("POST", "/ping", tagged(&hit, 3));
  router.add("GET", "/ping", tagged(&hit, 4));

  auto m = router.match("POST", "/v1/chat/completions");
  ASSERT_NE(m.handler, nullptr);
  (*m.handler)(nullptr);
  EXPECT_EQ(hit, 2);

  auto missing = router.match("GET", "/v1/chat/completions/");  // exact: no slash folding
  EXPECT_EQ(missing.handler, nullptr);
  EXPECT_FALSE(missing.path_known());

  auto wrong_method = router.match("GET", "/v1/chat/completions");
  EXPECT_EQ(wrong_method.handler, nullptr);
  ASSERT_TRUE(wrong_method.path_known());
  EXPECT_EQ(wrong_method.allowed, std::vector<std::string>{"POST"});

  auto both = router.match("PUT", "/ping");
  EXPECT_EQ(both.allowed, (std::vector<std::string>{"GET", "POST"}));
  EXPECT_EQ(router.match("get", "/v1/models").handler, nullptr) << "methods are case-sensitive";
}

TEST(HttpRouter, AnyMethodPathAnswersEveryMethodButExactOnesFirst) {
  Router router;
  int hit = 0;
  router.any("/metrics", tagged(&hit, 1));
  router.add("DELETE", "/metrics", tagged(&hit, 2));
  for (const char* method : {"GET", "HEAD", "POST", "PROPFIND"}) {
    auto m = router.match(method, "/metrics");
    ASSERT_NE(m.handler, nullptr) << method;
    (*m.handler)(nullptr);
    EXPECT_EQ(hit, 1) << method;
  }
  (*router.match("DELETE", "/metrics").handler)(nullptr);
  EXPECT_EQ(hit, 2);
  EXPECT_FALSE(router.match("GET", "/metrics/").path_known());
}

TEST(HttpRouter, RejectsBadRoutes) {
  Router router;
  EXPECT_THROW(router.add("GET", "v1/models", [](std::shared_ptr<Exchange>) {}), std::invalid_argument);
  EXPECT_THROW(router.add("", "/x", [](std::shared_ptr<Exchange>) {}), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "/x", Handler{}), std::invalid_argument);
}

TEST(HttpApiKeyAuth, DisabledWithoutKeys) {
  ApiKeyAuth auth({"", ""});  // empty keys are dropped, like vLLM
  EXPECT_FALSE(auth.enabled());
  EXPECT_TRUE(auth.allows("POST", "/v1/completions", std::nullopt));
}

TEST(HttpApiKeyAuth, FollowsVllmMiddleware) {
  ApiKeyAuth auth({"k1", "second-key"});
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::nullopt));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("")));
  EXPECT_TRUE(auth.allows("POST", "/v1/completions", std::string_view("Bearer k1")));
  EXPECT_TRUE(auth.allows("POST", "/v1/completions", std::string_view("bEaReR second-key")));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("Bearer k2")));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("Basic k1")));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("Bearer k1 ")));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("Bearerk1")));
  EXPECT_FALSE(auth.allows("POST", "/v1/completions", std::string_view("Bearer k")));
  // Guarded prefixes are plain string prefixes.
  EXPECT_FALSE(auth.allows("GET", "/v1foo", std::nullopt));
  EXPECT_FALSE(auth.allows("GET", "/v2/x", std::nullopt));
  EXPECT_FALSE(auth.allows("GET", "/inference/x", std::nullopt));
  EXPECT_FALSE(auth.allows("GET", "/cohere", std::nullopt));
  // Open paths and OPTIONS.
  EXPECT_TRUE(auth.allows("GET", "/health", std::nullopt));
  EXPECT_TRUE(auth.allows("GET", "/metrics", std::nullopt));
  EXPECT_TRUE(auth.allows("POST", "/tokenize", std::nullopt));
  EXPECT_TRUE(auth.allows("OPTIONS", "/v1/models", std::nullopt));
}

TEST(HttpStatusLine, SerializesHeadAndGuardsFraming) {
  std::string head = serialize_head(11, 404, "application/json", {{"x-a", "1"}, {"Content-Length", "9"}},
                                    BodyFraming::content_length, 22, true);
  EXPECT_EQ(head,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nx-a: 1\r\n"
            "content-length: 22\r\n\r\n");
  std::string stream = serialize_head(11, 200, "text/event-stream; charset=utf-8", {},
                                      BodyFraming::chunked, 0, false);
  EXPECT_NE(stream.find("transfer-encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(stream.find("connection: close\r\n"), std::string::npos);
  EXPECT_THROW(serialize_head(11, 200, "text/plain", {{"x", "a\r\nInjected: 1"}},
                              BodyFraming::content_length, 0, true),
               std::invalid_argument);
  EXPECT_THROW(serialize_head(11, 42, "", {}, BodyFraming::content_length, 0, true),
               std::invalid_argument);
}

TEST(HttpStatusLine, ChunkFramingAndPhrases) {
  EXPECT_EQ(frame_chunk("data: x\n\n"), "9\r\ndata: x\n\n\r\n");
  EXPECT_EQ(frame_chunk(std::string(255, 'a')).substr(0, 4), "ff\r\n");
  EXPECT_STREQ(reason_phrase(413), "Request Entity Too Large");  // Python 3.12 HTTPStatus phrase
  EXPECT_STREQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_STREQ(reason_phrase(799), "Unknown");
}

TEST(HttpRequestTarget, SplitsAndDecodes) {
  std::string path, query;
  split_target("/v1/models?a=%20b&c", path, query);
  EXPECT_EQ(path, "/v1/models");
  EXPECT_EQ(query, "a=%20b&c");
  split_target("/v1/chat%2Fcompletions", path, query);
  EXPECT_EQ(path, "/v1/chat/completions");
  EXPECT_EQ(query, "");
  split_target("/bad%zzescape%4", path, query);
  EXPECT_EQ(path, "/bad%zzescape%4");
  split_target("http://example.com:8000/health?x", path, query);
  EXPECT_EQ(path, "/health");
  EXPECT_EQ(query, "x");
}

TEST(HttpErrorBodies, ShapesMatchVllm) {
  EXPECT_EQ(detail_error_body("Not Found"), R"({"detail":"Not Found"})");
  EXPECT_EQ(unauthorized_error_body(), R"({"error":"Unauthorized"})");
  auto j = nlohmann::json::parse(envelope_error_body(413, "too big \xff"));
  EXPECT_EQ(j["error"]["type"], "Request Entity Too Large");
  EXPECT_EQ(j["error"]["code"], 413);
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["message"].get<std::string>().substr(0, 7), "too big");
}

TEST(HttpAccessLine, ReadsLikeUvicorn) {
  AccessLogEntry e{"127.0.0.1:42596", "POST", "/v1/chat/completions", 11, 200, 10, 12.34, true};
  EXPECT_EQ(uvicorn_style_access_line(e),
            "127.0.0.1:42596 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK 12.3 ms");
  e.completed = false;
  e.status = 0;
  EXPECT_EQ(uvicorn_style_access_line(e),
            "127.0.0.1:42596 - \"POST /v1/chat/completions HTTP/1.1\" 0 12.3 ms (incomplete)");
}

TEST(HttpRequest, HeaderLookupIsCaseInsensitive) {
  HttpRequest r;
  r.headers = {{"Content-Type", "application/json"}, {"X-Request-Id", "a"}, {"x-request-id", "b"}};
  EXPECT_EQ(r.header("content-type").value_or(""), "application/json");
  EXPECT_EQ(r.header("X-REQUEST-ID").value_or(""), "a") << "first value wins";
  EXPECT_FALSE(r.header("authorization").has_value());
}

}  // namespace
}  // namespace fp4serve::http
