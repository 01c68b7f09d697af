#include "tools/bench/sse_stream.h"

#include <nlohmann/json.hpp>

namespace fp4serve::tools::bench {
namespace {

std::string strip(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::vector<std::string> SseMessageSplitter::add(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<std::string> messages;
  std::size_t pos;
  while ((pos = buffer_.find("\n\n")) != std::string::npos) {
    std::string message = strip(std::string_view(buffer_).substr(0, pos));
    buffer_.erase(0, pos + 2);
    if (!message.empty()) messages.push_back(std::move(message));
  }
  const std::string prefix = "data: ";
  if (buffer_.rfind(prefix, 0) == 0) {
    const std::string content = strip(std::string_view(buffer_).substr(prefix.size()));
    if (content == "[DONE]" || (!content.empty() && nlohmann::json::accept(content))) {
      messages.push_back(strip(buffer_));
      buffer_.clear();
    }
  }
  return messages;
}

}  // namespace fp4serve::tools::bench
