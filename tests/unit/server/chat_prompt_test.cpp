// render_chat_prompt with a request's own chat_template (--trust-request-chat-template): compiled
// per request by the server's Jinja engine, under its limits; every fault in it is a 400, never a
// crash; "" falls back to the server's template (vLLM's `chat_template or default_template`).
#include "server/routes/chat_prompt.h"

#include <gtest/gtest.h>

#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server {
namespace {

using openai::testing::expect_api_error;

const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");

ServingContext context_with_template() {
  ServingContext ctx;
  ctx.chat_template = std::make_unique<ChatTemplate>("server:{{ messages[0].content }}");
  return ctx;
}

std::string render(const ServingContext& ctx, const std::optional<std::string>& tpl,
                   const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) {
  return render_chat_prompt(ctx, kMessages, nullptr, true, false, kwargs, tpl);
}

TEST(RequestChatTemplate, RendersInsteadOfTheServers) {
  const ServingContext ctx = context_with_template();
  EXPECT_EQ(render(ctx, std::nullopt), "server:Hi");
  EXPECT_EQ(render(ctx, std::string("")), "server:Hi");
  EXPECT_EQ(render(ctx, std::string("req:{{ messages[0].content }}|{{ greeting }}{% if add_generation_prompt %}>{% endif %}"),
                   nlohmann::ordered_json{{"greeting", "hello"}}),
            "req:Hi|hello>");
  // A server without a template of its own can still render a request's.
  ServingContext bare;
  EXPECT_EQ(render(bare, std::string("{{ messages | length }}")), "1");
}

TEST(RequestChatTemplate, FaultsAre400s) {
  const ServingContext ctx = context_with_template();
  for (const std::string tpl : {
           std::string("{% for m in messages %}"),                      // syntax: unclosed block
           std::string("{{ raise_exception('no system role') }}"),      // the template refuses
           std::string("{{ messages[0].content.nope() }}"),             // runtime error
           std::string("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),  // loop bomb
           std::string("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),                         // recursion
           "{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}",                         // nesting
       }) {
    const openai::ApiError e = expect_api_error([&] { render(ctx, tpl); });
    EXPECT_EQ(e.status, 400) << tpl.substr(0, 60);
    EXPECT_EQ(e.type, "BadRequestError") << tpl.substr(0, 60);
    EXPECT_FALSE(e.message.empty());
  }
  const openai::ApiError raised =
      expect_api_error([&] { render(ctx, std::string("{{ raise_exception('no system role') }}")); });
  EXPECT_NE(raised.message.find("no system role"), std::string::npos) << raised.message;
}

}  // namespace
}  // namespace fp4serve::server
