#include "server/openai/tool_parser_qwen3_coder.h"

#include <algorithm>

#include "server/openai/tool_parser_qwen3_coder_markup.h"
#include "server/openai/tool_parser_values.h"

namespace fp4serve::server::openai {
namespace {

using namespace qwen3_coder;
using json = nlohmann::ordered_json;

// Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag possibly split
// across deltas; vLLM's partial_tag_overlap).
std::size_t partial_tag_overlap(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// Where content ends, as far as the text seen so far can tell: the first <tool_call> block that
// holds a "<function=", or a bare "<function=" when no <tool_call> was written (vLLM's back-off).
// npos while undecided.
std::size_t streaming_content_end(std::string_view text) {
  std::size_t search = 0;
  bool any_block = false;
  while (true) {
    const std::size_t tc = text.find(kToolCallStart, search);
    if (tc == npos) break;
    any_block = true;
    const std::size_t close = text.find(kToolCallEnd, tc + kToolCallStart.size());
    const std::size_t limit = close != npos ? close : text.size();
    const std::size_t func = text.find(kFunctionPrefix, tc + kToolCallStart.size());
    if (func != npos && func + kFunctionPrefix.size() <= limit) return tc;
    if (close == npos) return npos;  // an open block: wait for its "<function="
    search = close + kToolCallEnd.size();
  }
  if (any_block) return npos;
  return text.find(kFunctionPrefix);
}

// The arguments known so far of an open call: "{" + its completed parameters, each completed when
// its "</parameter>" is followed by a structural delimiter (so later text cannot change it).
std::string partial_arguments(std::string_view function_call, const json& tools) {
  const std::size_t name_end = function_call.find('>');
  const std::string name(function_call.substr(0, name_end));
  const auto properties = find_tool_properties(tools, name);
  const auto valid = valid_param_names(tools, name);
  const std::string_view body = function_call.substr(name_end + 1);
  std::string out = "{";
  bool first = true;
  std::size_t pos = 0;
  while (true) {
    const std::size_t start = next_structural_param_start(body, pos, nullptr);
    if (start == npos) break;
    const std::size_t pname_end = body.find('>', start + kParameterPrefix.size());
    if (pname_end == npos) break;
    const std::string param_name(body.substr(start + kParameterPrefix.size(), pname_end - start - kParameterPrefix.size()));
    std::size_t value_start = pname_end + 1;
    if (value_start < body.size() && body[value_start] == '\n') ++value_start;
    const std::string_view value_text = body.substr(value_start);
    const std::size_t end = find_true_param_end(value_text, valid ? &*valid : nullptr, /*require_lookahead=*/true);
    if (end == npos) break;
    std::string_view value = value_text.substr(0, end);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    const json converted = convert_param_value(std::string(value), param_name, properties);
    out += first ? "" : ", ";
    first = false;
    out += python_json_dumps(json(param_name)) + ": " + python_json_dumps(converted);
    pos = value_start + end + kParameterEnd.size();
  }
  return out;
}

}  // namespace

ToolCallExtraction extract_qwen3_coder_tool_calls(std::string_view model_output, const json& tools) {
  ToolCallExtraction result;
  auto all_content = [&] {
    ToolCallExtraction r;
    if (!model_output.empty()) r.content = std::string(model_output);
    return r;
  };
  if (model_output.find(kFunctionPrefix) == npos) return all_content();
  try {
    const auto spans = function_call_strings(model_output, tools);
    if (spans.empty()) return all_content();
    for (const auto& span : spans) {
      auto parsed = parse_function_call(span.text, tools);
      if (!parsed) continue;
      result.tool_calls.push_back({make_chat_tool_call_id(), parsed->name, python_json_dumps(parsed->arguments)});
    }
  } catch (const ToolCallExtractionAborted&) {
    return all_content();
  }
  result.tools_called = !result.tool_calls.empty();
  const std::size_t end = content_end(model_output);
  const std::string_view content = end == npos ? model_output : model_output.substr(0, end);
  if (!content.empty()) result.content = std::string(content);
  return result;
}

Qwen3CoderToolStreamParser::Qwen3CoderToolStreamParser(json tools) : tools_(std::move(tools)) {}

ToolStreamDelta Qwen3CoderToolStreamParser::feed(std::string_view delta_text) {
  text_.append(delta_text);
  return step(/*final=*/false);
}

ToolStreamDelta Qwen3CoderToolStreamParser::finish() {
  ToolStreamDelta out = step(/*final=*/true);
  // No call came out of the markup (every name invalid): vLLM's chat serving then keeps the whole
  // text as content, so the held-back rest is content too.
  if (next_index_ == 0) emit_content(text_.size(), out);
  return out;
}

void Qwen3CoderToolStreamParser::emit_content(std::size_t upto, ToolStreamDelta& out) {
  if (upto > content_sent_) {
    out.content.append(text_, content_sent_, upto - content_sent_);
    content_sent_ = upto;
  }
}

ToolStreamDelta Qwen3CoderToolStreamParser::step(bool final) {
  ToolStreamDelta out;
  if (content_end_ == std::string::npos) {
    content_end_ = streaming_content_end(text_);
    if (content_end_ == std::string::npos) {
      std::size_t safe = text_.size();
      if (!final) {
        safe = std::min({text_.find(kToolCallStart), text_.find(kFunctionPrefix),
                         text_.size() - partial_tag_overlap(text_, kToolCallStart),
                         text_.size() - partial_tag_overlap(text_, kFunctionPrefix)});
      }
      emit_content(safe, out);
      return out;
    }
  }
  emit_content(content_end_, out);
  advance_calls(final, out);
  return out;
}

void Qwen3CoderToolStreamParser::emit_arguments(const std::string& target, CallState& call, ToolStreamDelta& out) {
  const std::string& sent = call.arguments_sent;
  if (target.size() < sent.size() || target.compare(0, sent.size(), sent) != 0) return;  // cannot retract
  if (target.size() == sent.size()) return;
  const std::string fresh = target.substr(sent.size());
  if (!out.tool_calls.empty() && out.tool_calls.back().index == call.index) {
    out.tool_calls.back().arguments += fresh;
  } else {
    out.tool_calls.push_back({call.index, std::nullopt, std::nullopt, fresh});
  }
  call.arguments_sent = target;
}

void Qwen3CoderToolStreamParser::advance_calls(bool final, ToolStreamDelta& out) {
  std::vector<FunctionCallSpan> spans;
  try {
    spans = function_call_strings(text_, tools_);
  } catch (const ToolCallExtractionAborted&) {
    return;
  }
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (calls_.size() <= i) calls_.emplace_back();
    CallState& call = calls_[i];
    if (call.dropped || call.closed) continue;
    const std::string_view text = spans[i].text;
    if (!call.decided) {
      const std::size_t name_end = text.find('>');
      if (name_end == npos) {
        if (!final) return;  // name still arriving
        call.decided = call.dropped = true;
        continue;
      }
      const std::string name(text.substr(0, name_end));
      call.decided = true;
      if (!is_valid_function_name(name)) {
        call.dropped = true;
        continue;
      }
      call.index = next_index_++;
      out.tool_calls.push_back({call.index, make_streaming_tool_call_id(), name, "{"});
      call.arguments_sent = "{";
    }
    try {
      if (spans[i].closed || final) {
        const auto parsed = parse_function_call(text, tools_);
        if (parsed) emit_arguments(python_json_dumps(parsed->arguments), call, out);
        call.closed = true;
        continue;
      }
      emit_arguments(partial_arguments(text, tools_), call, out);
    } catch (const ToolCallExtractionAborted&) {
      call.closed = true;  // vLLM would report no tool calls at all here; nothing more can be sent
      continue;
    }
    return;  // an open call: later calls wait until it closes
  }
}

}  // namespace fp4serve::server::openai
