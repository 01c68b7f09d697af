// libFuzzer target: the Jinja engine (src/tokenizer/chat_template) on arbitrary templates and
// values. Input: TEMPLATE, optionally followed by a NUL byte and a JSON object of variables (without
// one, or when it is not a JSON object, the variables of tests/data/chat_templates/
// jinja_feature_cases.jsonl are used). The template is compiled and rendered with the sandbox
// limits the server uses (TemplateLimits defaults).
//
// Outcomes: the rendered text, or a TemplateError. Anything else (another exception, a crash, a
// sanitizer report, a hang past libFuzzer's -timeout, memory past -rss_limit_mb) is a finding, and
// so is output that is not valid UTF-8 when the template and the values are.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "tokenizer/chat_template/jinja_template.h"
#include "tokenizer/utf8.h"

namespace {

using namespace fp4serve;

const nlohmann::ordered_json& default_values() {
  // The variables of jinja_feature_cases.jsonl (the seeds omit them), and a small chat.
  static const auto v = nlohmann::ordered_json::parse(R"({
    "d": {"a": 1, "b": "two", "c": [1, 2], "n": null},
    "users": [{"name": "bob", "age": 31, "active": true}, {"name": "amy", "age": 25, "active": false},
              {"name": "cy", "age": 40, "active": true}],
    "u": {"é": "ü", "emoji": "👩‍👩‍👧", "ctl": "\u0001\u001f\u007f", "zw": "a\u200bb"},
    "nums": [3, 1.5, -2, 0], "x": null, "t": true,
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "<|im_end|>"})");
  return v;
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  nlohmann::ordered_json values;
  if (nul != std::string_view::npos) {
    // Deep values are refused by the engine itself (jinja_value.h kMaxValueDepth).
    values = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
  }
  if (!values.is_object()) values = default_values();
  std::string out;
  try {
    const jinja::Template tpl{std::string(source)};
    out = tpl.render(values);
  } catch (const jinja::TemplateError&) {
    return 0;  // refused with a message (syntax, runtime, raise_exception, limit)
  } catch (const std::exception& e) {
    fuzz::finding(std::string(typeid(e).name()) + " escaped: " + e.what(), input);
  }
  if (tokenizer::utf8::is_valid(source) && fuzz::all_valid_utf8(values) && !tokenizer::utf8::is_valid(out))
    fuzz::finding("valid UTF-8 template and values rendered invalid UTF-8", input);
  return 0;
}
