#include "server/openai/tool_parser_chat_output.h"

namespace fp4serve::server::openai {

ChatOutput parse_chat_output(std::string_view text, const ChatOutputOptions& options) {
  ChatOutput out;
  std::optional<std::string> content;
  if (options.reasoning_parser) {
    auto split = Qwen3ReasoningParser::extract(text, options.reasoning);
    out.reasoning = std::move(split.reasoning);
    content = std::move(split.content);
  } else if (!text.empty()) {
    content = std::string(text);
  }
  if (options.forced_tools()) {
    // vLLM answers a forced call with content "" next to the calls.
    if (content && !content->empty()) {
      if (auto calls = parse_forced_tool_calls(options.forced, options.forced_function, *content)) {
        out.tools_called = true;
        out.tool_calls = std::move(*calls);
        content = "";
      }
    }
  } else if (options.tool_parser) {
    auto extraction = extract_qwen3_coder_tool_calls(content.value_or(""), options.tools);
    if (extraction.tools_called) {
      out.tools_called = true;
      out.tool_calls = std::move(extraction.tool_calls);
      content = std::move(extraction.content);
    }
  }
  out.content = std::move(content);
  return out;
}

ChatOutputStreamParser::ChatOutputStreamParser(ChatOutputOptions options) : options_(std::move(options)) {
  if (options_.reasoning_parser) reasoning_.emplace(options_.reasoning);
  if (options_.forced_tools()) forced_.emplace(options_.forced, options_.forced_function);
  else if (options_.tool_parser) tools_.emplace(options_.tools);
}

void ChatOutputStreamParser::route_content(const std::string& content, bool final, ChatOutputDelta& out) {
  if (forced_) {  // the content is the constrained JSON: only calls are streamed
    for (auto& call : forced_->feed(content)) out.tool_calls.push_back(std::move(call));
    return;
  }
  if (!tools_) {
    out.content += content;
    return;
  }
  ToolStreamDelta d = content.empty() ? ToolStreamDelta{} : tools_->feed(content);
  if (final) {
    ToolStreamDelta tail = tools_->finish();
    d.content += tail.content;
    for (auto& call : tail.tool_calls) d.tool_calls.push_back(std::move(call));
  }
  out.content += d.content;
  for (auto& call : d.tool_calls) out.tool_calls.push_back(std::move(call));
}

ChatOutputDelta ChatOutputStreamParser::feed(std::string_view delta_text) {
  ChatOutputDelta out;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->feed(delta_text);
    out.reasoning = std::move(r.reasoning);
    route_content(r.content, /*final=*/false, out);
  } else {
    route_content(std::string(delta_text), /*final=*/false, out);
  }
  return out;
}

ChatOutputDelta ChatOutputStreamParser::finish() {
  ChatOutputDelta out;
  std::string content;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->finish();
    out.reasoning = std::move(r.reasoning);
    content = std::move(r.content);
  }
  route_content(content, /*final=*/true, out);
  return out;
}

}  // namespace fp4serve::server::openai
