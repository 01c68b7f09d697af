// CORS decisions against Starlette's CORSMiddleware (starlette/middleware/cors.py, the version vLLM
// runs), value by value: preflight answers and their failure texts, the headers simple responses
// get, and where CORS sits in the server (after the API-key check, before routing).
#include <gtest/gtest.h>

#include "http_test_support.h"
#include "server/http/cors_policy.h"

namespace fp4serve::http {
namespace {

using testing::RawClient;
using testing::test_config;
using testing::text_response;

HttpRequest request(std::string method, std::vector<Header> headers) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = r.path = "/v1/chat/completions";
  r.headers = std::move(headers);
  return r;
}

std::string header(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (field_name_equals(h.name, name)) return h.value;
  }
  return "<absent>";
}

HttpRequest browser_preflight(std::string origin, std::string method, std::optional<std::string> headers) {
  std::vector<Header> h = {{"Origin", std::move(origin)}, {"Access-Control-Request-Method", std::move(method)}};
  if (headers) h.push_back({"Access-Control-Request-Headers", *headers});
  return request("OPTIONS", std::move(h));
}

constexpr const char* kAllMethods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";

TEST(CorsPolicy, VllmDefaultsAnswerAnyPreflightWithAWildcardAndEchoTheRequestedHeaders) {
  CorsPolicy cors{CorsSettings{}};
  auto r = cors.preflight(browser_preflight("https://app.example", "POST", "content-type, authorization"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "OK");
  EXPECT_EQ(r->content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(header(r->headers, "access-control-allow-origin"), "*");
  EXPECT_EQ(header(r->headers, "access-control-allow-methods"), kAllMethods);
  EXPECT_EQ(header(r->headers, "access-control-max-age"), "600");
  EXPECT_EQ(header(r->headers, "access-control-allow-headers"), "content-type, authorization");
  EXPECT_EQ(header(r->headers, "vary"), "<absent>");
  EXPECT_EQ(header(r->headers, "access-control-allow-credentials"), "<absent>");
  // Without requested headers there is nothing to echo.
  auto bare = cors.preflight(browser_preflight("https://app.example", "GET", std::nullopt));
  EXPECT_EQ(header(bare->headers, "access-control-allow-headers"), "<absent>");
}

TEST(CorsPolicy, MethodsCompareCaseSensitivelyAsStarletteDoes) {
  CorsPolicy cors{CorsSettings{}};
  auto r = cors.preflight(browser_preflight("https://app.example", "post", std::nullopt));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "Disallowed CORS method");
  EXPECT_EQ(header(r->headers, "access-control-allow-origin"), "*");  // the preflight headers still go out
}

TEST(CorsPolicy, OnlyOptionsWithOriginAndRequestMethodIsAPreflight) {
  CorsPolicy cors{CorsSettings{}};
  EXPECT_FALSE(cors.preflight(request("OPTIONS", {{"Origin", "https://a"}})).has_value());
  EXPECT_FALSE(cors.preflight(request("OPTIONS", {{"Access-Control-Request-Method", "POST"}})).has_value());
  EXPECT_FALSE(
      cors.preflight(request("POST", {{"Origin", "https://a"}, {"Access-Control-Request-Method", "POST"}})).has_value());
  // An empty request-method header is present, so it is a preflight (and "" is no allowed method).
  auto empty = cors.preflight(request("OPTIONS", {{"origin", "https://a"}, {"access-control-request-method", ""}}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->body, "Disallowed CORS method");
}

TEST(CorsPolicy, ListedOriginsAreEchoedWithVaryAndOthersRefused) {
  CorsSettings s;
  s.allowed_origins = {"https://app.example"};
  CorsPolicy cors{s};
  auto ok = cors.preflight(browser_preflight("https://app.example", "GET", std::nullopt));
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(header(ok->headers, "access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(header(ok->headers, "vary"), "Origin");
  auto bad = cors.preflight(browser_preflight("https://evil.example", "GET", std::nullopt));
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, "Disallowed CORS origin");
  EXPECT_EQ(header(bad->headers, "access-control-allow-origin"), "<absent>");
  EXPECT_EQ(header(bad->headers, "vary"), "Origin");
  // Exact match only: no prefix, case or trailing-slash leniency.
  EXPECT_EQ(cors.preflight(browser_preflight("https://app.example/", "GET", std::nullopt))->status, 400);
  EXPECT_EQ(cors.preflight(browser_preflight("HTTPS://APP.EXAMPLE", "GET", std::nullopt))->status, 400);
}

TEST(CorsPolicy, ListedHeadersIncludeTheSafelistedOnesSortedAndCompareCaseInsensitively) {
  CorsSettings s;
  s.allowed_headers = {"X-Key", "authorization"};
  s.allowed_methods = {"GET", "POST"};
  CorsPolicy cors{s};
  auto ok = cors.preflight(browser_preflight("https://a", "POST", "Authorization ,\tx-key, Content-Type"));
  EXPECT_EQ(ok->status, 200) << ok->body;
  // sorted() of exact strings: upper case sorts before lower case.
  EXPECT_EQ(header(ok->headers, "access-control-allow-headers"),
            "Accept, Accept-Language, Content-Language, Content-Type, X-Key, authorization");
  EXPECT_EQ(header(ok->headers, "access-control-allow-methods"), "GET, POST");
  EXPECT_EQ(cors.preflight(browser_preflight("https://a", "POST", "x-other"))->body, "Disallowed CORS headers");
  // An empty item between commas is a header nobody allowed.
  EXPECT_EQ(cors.preflight(browser_preflight("https://a", "POST", "accept,,x-key"))->body, "Disallowed CORS headers");
  EXPECT_EQ(cors.preflight(browser_preflight("https://a", "DELETE", "x-other"))->body,
            "Disallowed CORS method, headers");
}

TEST(CorsPolicy, EveryFailureIsNamedInStarlettesOrder) {
  CorsSettings s;
  s.allowed_origins = {"https://app.example"};
  s.allowed_methods = {"GET"};
  s.allowed_headers = {};
  CorsPolicy cors{s};
  auto r = cors.preflight(browser_preflight("https://evil.example", "PUT", "x-custom"));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "Disallowed CORS origin, method, headers");
  EXPECT_EQ(header(r->headers, "access-control-allow-headers"),
            "Accept, Accept-Language, Content-Language, Content-Type");
}

TEST(CorsPolicy, CredentialsEchoTheOriginEvenWithTheWildcard) {
  CorsSettings s;
  s.allow_credentials = true;
  CorsPolicy cors{s};
  auto r = cors.preflight(browser_preflight("https://app.example", "POST", std::nullopt));
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(r->headers, "access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(header(r->headers, "access-control-allow-credentials"), "true");
  EXPECT_EQ(header(r->headers, "vary"), "Origin");
  // Simple requests: Starlette keeps "*" unless the request carries cookies.
  std::vector<Header> headers;
  cors.decorate(request("GET", {{"Origin", "https://app.example"}}), headers);
  EXPECT_EQ(header(headers, "access-control-allow-origin"), "*");
  EXPECT_EQ(header(headers, "access-control-allow-credentials"), "true");
  EXPECT_EQ(header(headers, "vary"), "<absent>");
}

TEST(CorsPolicy, SimpleResponsesGetTheWildcardOrTheOriginWithVary) {
  CorsPolicy defaults{CorsSettings{}};
  std::vector<Header> plain = {{"x-request-id", "abc"}};
  defaults.decorate(request("POST", {{"Origin", "https://app.example"}}), plain);
  EXPECT_EQ(header(plain, "access-control-allow-origin"), "*");
  EXPECT_EQ(header(plain, "vary"), "<absent>");
  EXPECT_EQ(header(plain, "x-request-id"), "abc");

  std::vector<Header> with_cookie = {{"Vary", "Accept-Encoding"}};
  defaults.decorate(request("GET", {{"Origin", "https://app.example"}, {"Cookie", "a=b"}}), with_cookie);
  EXPECT_EQ(header(with_cookie, "access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(header(with_cookie, "vary"), "Accept-Encoding, Origin");

  CorsSettings listed;
  listed.allowed_origins = {"https://app.example"};
  CorsPolicy cors{listed};
  std::vector<Header> allowed;
  cors.decorate(request("GET", {{"Origin", "https://app.example"}}), allowed);
  EXPECT_EQ(header(allowed, "access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(header(allowed, "vary"), "Origin");
  std::vector<Header> other;
  cors.decorate(request("GET", {{"Origin", "https://evil.example"}}), other);
  EXPECT_TRUE(other.empty());  // served, but nothing that lets a browser read it
}

TEST(CorsPolicy, SetHeaderReplacesTheFirstAndDropsTheRestLikeMutableHeaders) {
  std::vector<Header> h = {{"A", "1"}, {"b", "2"}, {"a", "3"}};
  set_header(h, "a", "x");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].name, "a");
  EXPECT_EQ(h[0].value, "x");
  EXPECT_EQ(h[1].name, "b");
  set_header(h, "c", "y");
  EXPECT_EQ(h.back().value, "y");
}

// ---------------------------------------------------------------- in the server

Router cors_router() {
  Router router;
  router.get("/v1/models", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, "models")); });
  router.post("/v1/chat/completions", [](std::shared_ptr<Exchange> ex) {
    ex->start_stream();
    ex->write("data: x\n\n");
    ex->finish("data: [DONE]\n\n");
  });
  return router;
}

TEST(HttpServerCors, PreflightsAreAnsweredBeforeRoutingAndWithoutTheApiKey) {
  HttpServerConfig cfg = test_config();
  cfg.api_keys = {"sk-test"};
  HttpServer server(cfg, cors_router());
  server.start();
  RawClient client(server.port());
  const std::string preflight =
      "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
      "Access-Control-Request-Headers: authorization, content-type\r\n";
  auto known = client.request("OPTIONS", "/v1/chat/completions", {}, preflight);
  EXPECT_EQ(known.status, 200);
  EXPECT_EQ(known.body, "OK");
  EXPECT_EQ(known.header("access-control-allow-headers"), "authorization, content-type");
  auto unknown = client.request("OPTIONS", "/no/such/route", {}, preflight);
  EXPECT_EQ(unknown.status, 200);  // Starlette answers before the router
  // OPTIONS that is no preflight goes to the router (405 there), with CORS headers.
  auto not_preflight = client.request("OPTIONS", "/v1/models", {}, "Origin: https://app.example\r\n");
  EXPECT_EQ(not_preflight.status, 405);
  EXPECT_EQ(not_preflight.header("access-control-allow-origin"), "*");
}

TEST(HttpServerCors, ResponsesCarryTheHeadersExceptTheApiKeyRefusal) {
  HttpServerConfig cfg = test_config();
  cfg.api_keys = {"sk-test"};
  HttpServer server(cfg, cors_router());
  server.start();
  RawClient client(server.port());
  const std::string origin = "Origin: https://app.example\r\n";
  auto refused = client.request("GET", "/v1/models", {}, origin);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.header("access-control-allow-origin"), "");  // vLLM's auth middleware is outside CORS
  auto ok = client.request("GET", "/v1/models", {}, origin + "Authorization: Bearer sk-test\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("access-control-allow-origin"), "*");
  auto missing = client.request("GET", "/nope", {}, origin);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("access-control-allow-origin"), "*");
  auto stream = client.request("POST", "/v1/chat/completions", "{}", origin + "Authorization: Bearer sk-test\r\n");
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.chunked);
  EXPECT_EQ(stream.header("access-control-allow-origin"), "*");
  auto no_origin = client.request("GET", "/v1/models", {}, "Authorization: Bearer sk-test\r\n");
  EXPECT_EQ(no_origin.header("access-control-allow-origin"), "");
}

}  // namespace
}  // namespace fp4serve::http
