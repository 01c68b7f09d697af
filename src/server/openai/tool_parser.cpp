#include "server/openai/tool_parser.h"

#include <random>

namespace fp4serve::server::openai {
namespace {

std::string random_hex(std::size_t digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(digits);
  while (out.size() < digits) {
    std::uint64_t bits = rng();
    for (int i = 0; i < 16 && out.size() < digits; ++i, bits >>= 4) out += kHex[bits & 0xF];
  }
  return out;
}

}  // namespace

nlohmann::ordered_json to_json(const ToolCall& call) {
  nlohmann::ordered_json j;
  j["id"] = call.id;
  j["type"] = "function";
  j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return j;
}

nlohmann::ordered_json to_json(const ToolCallDelta& delta) {
  nlohmann::ordered_json j;
  j["index"] = delta.index;
  if (delta.id) {
    j["id"] = *delta.id;
    j["type"] = "function";
  }
  nlohmann::ordered_json fn = nlohmann::ordered_json::object();
  if (delta.name) fn["name"] = *delta.name;
  fn["arguments"] = delta.arguments;
  j["function"] = std::move(fn);
  return j;
}

std::string chat_finish_reason(std::string_view engine_finish_reason, ToolChoice tool_choice, bool tools_called) {
  const bool tool_calls = (tool_choice == ToolChoice::kAuto && tools_called) ||
                          (tool_choice == ToolChoice::kRequired && engine_finish_reason == "stop");
  if (tool_calls) return "tool_calls";
  if (engine_finish_reason.empty()) return "stop";
  return std::string(engine_finish_reason);
}

std::string chat_stream_finish_reason(std::string_view engine_finish_reason, ToolChoice tool_choice,
                                      bool tools_streamed) {
  if (tools_streamed && tool_choice != ToolChoice::kNamed) return "tool_calls";
  if (engine_finish_reason.empty()) return "stop";
  return std::string(engine_finish_reason);
}

std::string make_chat_tool_call_id() { return "chatcmpl-tool-" + random_hex(32); }
std::string make_streaming_tool_call_id() { return "call_" + random_hex(24); }

}  // namespace fp4serve::server::openai
