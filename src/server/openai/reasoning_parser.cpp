#include "server/openai/reasoning_parser.h"

// DESIGN NOTES (where vLLM's two paths disagree, one rule is used for streaming and non-streaming):
// - The first "<think>" met while still in reasoning is removed; text before it stays reasoning.
//   (vLLM non-streaming drops text before it via str.partition; its streaming keeps it.)
// - Whichever comes first ends reasoning: "</think>" or a genuine "<tool_call>" (one followed by
//   "<function=" / "<function "). vLLM non-streaming prefers a later "</think>" over an earlier
//   tool call, and only checks the first "<tool_call>"; its streaming path behaves like ours.
// - Thinking off or a prompt that already closed the think block: all content, even if the model
//   emits a stray "</think>" (vLLM streaming does this; its non-streaming would split on it).
// - Empty reasoning/content are reported as absent (vLLM returns "" for an empty reasoning before
//   "</think>", None elsewhere).

#include <string>

namespace fp4serve::server::openai {
namespace {

constexpr std::string_view kThinkStart = kQwen3ReasoningStart;
constexpr std::string_view kThinkEnd = kQwen3ReasoningEnd;
constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kFunctionOpen = "<function";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_proper_prefix_of(std::string_view text, std::string_view tag) {
  return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

enum class Verdict { kYes, kNo, kUndecided };

// Is the text right after "<tool_call>" the start of a function block (vLLM: `<function[\s=]`
// matched after lstrip)? Undecided while it could still become one.
Verdict genuine_tool_call(std::string_view after) {
  std::size_t i = 0;
  while (i < after.size() && is_space(after[i])) ++i;
  const std::string_view rest = after.substr(i);
  if (rest.size() <= kFunctionOpen.size()) {
    return kFunctionOpen.substr(0, rest.size()) == rest ? Verdict::kUndecided : Verdict::kNo;
  }
  if (rest.substr(0, kFunctionOpen.size()) != kFunctionOpen) return Verdict::kNo;
  const char next = rest[kFunctionOpen.size()];
  return (next == '=' || is_space(next)) ? Verdict::kYes : Verdict::kNo;
}

}  // namespace

bool prompt_ends_reasoning(std::string_view prompt_text) {
  const auto end = prompt_text.rfind(kThinkEnd);
  if (end == std::string_view::npos) return false;
  const auto start = prompt_text.rfind(kThinkStart);
  return start == std::string_view::npos || end > start;
}

Qwen3ReasoningParser::Qwen3ReasoningParser(ReasoningParserOptions options)
    : in_reasoning_(options.thinking_enabled && !options.prompt_ends_reasoning) {}

ReasoningDelta Qwen3ReasoningParser::feed(std::string_view delta_text) {
  ReasoningDelta out;
  if (!in_reasoning_) {
    out.content.assign(delta_text);
    return out;
  }
  pending_.append(delta_text);
  scan(/*final=*/false, out);
  return out;
}

ReasoningDelta Qwen3ReasoningParser::finish() {
  ReasoningDelta out;
  if (in_reasoning_) scan(/*final=*/true, out);
  return out;
}

// Classifies pending_ from the start. Everything up to the next '<' is reasoning; at a '<' we
// decide whether a tag starts there, or wait for more text when it is still a possible prefix.
void Qwen3ReasoningParser::scan(bool final, ReasoningDelta& out) {
  const std::string_view text = pending_;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t lt = text.find('<', pos);
    if (lt == std::string_view::npos) {
      out.reasoning.append(text.substr(pos));
      pos = text.size();
      break;
    }
    out.reasoning.append(text.substr(pos, lt - pos));
    pos = lt;
    const std::string_view rest = text.substr(lt);

    if (rest.substr(0, kThinkEnd.size()) == kThinkEnd) {
      out.content.append(rest.substr(kThinkEnd.size()));
      in_reasoning_ = false;
      pending_.clear();
      return;
    }
    if (!think_tag_stripped_ && rest.substr(0, kThinkStart.size()) == kThinkStart) {
      think_tag_stripped_ = true;
      pos += kThinkStart.size();
      continue;
    }
    if (rest.substr(0, kToolCall.size()) == kToolCall) {
      Verdict verdict = genuine_tool_call(rest.substr(kToolCall.size()));
      if (verdict == Verdict::kUndecided && final) verdict = Verdict::kNo;
      if (verdict == Verdict::kYes) {
        out.content.append(rest);
        in_reasoning_ = false;
        pending_.clear();
        return;
      }
      if (verdict == Verdict::kUndecided) {
        pending_.erase(0, lt);  // hold "<tool_call>..." until the next delta decides it
        return;
      }
      out.reasoning.push_back('<');
      ++pos;
      continue;
    }
    const bool maybe_tag = is_proper_prefix_of(rest, kThinkEnd) || is_proper_prefix_of(rest, kToolCall) ||
                           (!think_tag_stripped_ && is_proper_prefix_of(rest, kThinkStart));
    if (maybe_tag && !final) {
      pending_.erase(0, lt);  // a tag may be split across deltas
      return;
    }
    out.reasoning.push_back('<');
    ++pos;
  }
  pending_.clear();
}

ReasoningSplit Qwen3ReasoningParser::extract(std::string_view model_output, ReasoningParserOptions options) {
  Qwen3ReasoningParser parser(options);
  ReasoningDelta all = parser.feed(model_output);
  ReasoningDelta tail = parser.finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  ReasoningSplit split;
  if (!all.reasoning.empty()) split.reasoning = std::move(all.reasoning);
  if (!all.content.empty()) split.content = std::move(all.content);
  return split;
}

}  // namespace fp4serve::server::openai
