// libFuzzer target: client-controlled values through the real Qwen3.6 chat template
// (tests/data/chat_templates/qwen3.6.jinja, or FP4SERVE_FUZZ_CHAT_TEMPLATE). Input: a JSON object
// shaped like the template context of tests/data/chat_templates/cases.jsonl: "messages", "tools",
// "add_generation_prompt", and any other key as a template kwarg (enable_thinking,
// preserve_thinking, ...). It goes through make_chat_template_context and ChatTemplate::render as
// the chat route's render_chat_prompt does, but without the request parser in front, so message
// and tool shapes the parser would pass through unchanged are reached directly.
//
// Outcomes: the prompt, a ChatTemplateError (raise_exception, type errors, limits) or
// std::invalid_argument (malformed context). Anything else is a finding, and so is a prompt that is
// not valid UTF-8 when every string in the input is.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "json_mutator.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/utf8.h"

namespace {

using namespace fp4serve;
using Json = nlohmann::ordered_json;

const ChatTemplate* g_template = nullptr;


const fuzz::JsonVocabulary& vocabulary() {
  static const fuzz::JsonVocabulary v = [] {
    fuzz::JsonVocabulary voc;
    voc.top_level_fields = {
        {"messages", R"([{"role": "user", "content": "Hi"}])"},
        {"tools", R"([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "string", "description": "x", "enum": ["p", "q"]}}, "required": ["a"]}}}])"},
        {"add_generation_prompt", "true"},
        {"enable_thinking", "false"},
        {"preserve_thinking", "true"},
        {"reasoning_effort", R"("high")"},
        {"documents", R"([{"text": "x"}])"},
        {"eos_token", R"("<|im_end|>")"},
        {"bos_token", "null"},
    };
    voc.nested_fields = {
        {"role", R"("assistant")"},
        {"content", R"("text")"},
        {"reasoning_content", R"("because")"},
        {"reasoning", R"("because")"},
        {"tool_calls", R"([{"type": "function", "function": {"name": "f", "arguments": {"a": "p", "n": 1, "l": [1, 2], "o": {"k": null}}}}])"},
        {"function", R"({"name": "f", "arguments": {"a": 1}})"},
        {"arguments", R"({"a": true})"},
        {"name", R"("f")"},
        {"tool_call_id", R"("call_0")"},
        {"type", R"("text")"},
        {"text", R"("part")"},
        {"parameters", R"({"type": "object", "properties": {}})"},
        {"properties", R"({"x": {"type": "integer"}})"},
        {"description", R"("d")"},
        {"required", R"(["x"])"},
        {"enum", R"([1, "a", null])"},
    };
    voc.strings = {"system", "user", "assistant", "tool", "developer", "<think>\nx\n</think>\n\ny",
                   "</think>", "<tool_call>", "<tool_response>", "image", "video"};
    return voc;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_template = new ChatTemplate(fuzz::load_chat_template_or_skip("chat_template_fuzz"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (fuzz::json_text_depth(input) > 512) return -1;  // the server refuses deeper bodies first
  const Json in = Json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return -1;
  const Json messages = in.contains("messages") ? in["messages"] : Json::array();
  const Json tools = in.contains("tools") ? in["tools"] : Json();
  const bool add_generation_prompt = in.contains("add_generation_prompt") && in["add_generation_prompt"] == true;
  Json kwargs = Json::object();
  for (auto it = in.begin(); it != in.end(); ++it) {
    if (it.key() != "messages" && it.key() != "tools" && it.key() != "add_generation_prompt") kwargs[it.key()] = it.value();
  }
  const Json special = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
  std::string prompt;
  try {
    const Json context = make_chat_template_context(messages, tools, add_generation_prompt, special, kwargs);
    prompt = g_template->render(context);
  } catch (const ChatTemplateError&) {
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::finding(std::string(typeid(e).name()) + " escaped: " + e.what(), input);
  }
  if (fuzz::all_valid_utf8(in) && !tokenizer::utf8::is_valid(prompt)) fuzz::finding("the prompt is not valid UTF-8", input);
  return 0;
}

FP4SERVE_FUZZ_JSON_MUTATOR(vocabulary())
