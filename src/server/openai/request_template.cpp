#include "server/openai/request_template.h"

#include <string>
#include <vector>

namespace fp4serve::server::openai {

void check_request_chat_template(const Json& body, const std::optional<Json>& user_kwargs, const ServerLimits& limits) {
  const bool in_body = body.contains("chat_template") && !body["chat_template"].is_null();
  const bool in_kwargs = user_kwargs && user_kwargs->is_object() && user_kwargs->contains("chat_template") &&
                         !(*user_kwargs)["chat_template"].is_null();
  if ((in_body || in_kwargs) && !limits.trust_request_chat_template) {
    throw ApiException(value_error(
        "Chat template is passed with request, but --trust-request-chat-template is not set. "
        "Refused request with untrusted chat template."));
  }
}

Json template_variables(Json kwargs) {
  // Python prints the set in hash order, which varies between runs; ours is fixed.
  std::vector<std::string> unexpected;
  for (const char* k : {"chat_template", "tokenize"}) {
    if (kwargs.contains(k)) unexpected.push_back(std::string("'") + k + "'");
  }
  if (!unexpected.empty()) {
    std::string set = "{";
    for (std::size_t i = 0; i < unexpected.size(); ++i) set += (i ? ", " : "") + unexpected[i];
    throw ApiException(value_error("Found unexpected chat template kwargs from request: " + set + "}"));
  }
  // Named arguments of apply_chat_template, not template variables.
  for (const char* k : {"messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                        "return_dict"}) {
    kwargs.erase(k);
  }
  return kwargs;
}

}  // namespace fp4serve::server::openai
