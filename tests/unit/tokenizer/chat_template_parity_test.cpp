// Byte-for-byte parity of the chat template engine with transformers' apply_chat_template on the
// committed cases (tests/data/chat_templates/cases.jsonl, made by
// tools/reference/make_chat_template_cases.py): every Qwen template, every case.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "tokenizer/chat_template/chat_template.h"
#include "unit/tokenizer/chat_template_test_util.h"

namespace fp4serve {
namespace {

using nlohmann::ordered_json;

const std::vector<ordered_json>& all_cases() {
  static const auto cases = test::read_jsonl(test::chat_template_data_dir() + "/cases.jsonl");
  return cases;
}

const std::vector<std::string> kTemplates = {
    "qwen3.5.jinja",         "qwen3.6.jinja",          "Qwen3.5-4B.llama.cpp.jinja", "Qwen-QwQ-32B.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja",
};

TEST(ChatTemplateParity, CaseFileCoversEveryTemplate) {
  std::map<std::string, int> rendered, errors;
  for (const auto& c : all_cases()) (c.contains("expected") ? rendered : errors)[c["template"].get<std::string>()]++;
  EXPECT_GE(all_cases().size(), 200u);
  for (const auto& t : kTemplates) {
    EXPECT_GE(rendered[t], 20) << t;
    EXPECT_GE(errors[t], 1) << t;
  }
}

class ChatTemplateParityByTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateParityByTemplate, MatchesTransformersByteForByte) {
  const std::string name = GetParam();
  const ChatTemplate tpl(test::read_text_file(test::chat_template_data_dir() + "/" + name));
  int checked = 0;
  for (const auto& c : all_cases()) {
    if (c["template"] != name) continue;
    ++checked;
    const std::string id = c["id"].get<std::string>();
    if (c.contains("expected")) {
      const std::string expected = c["expected"].get<std::string>();
      try {
        const std::string actual = tpl.render(c["context"]);
        if (actual != expected) ADD_FAILURE() << id << ": " << test::first_difference(expected, actual);
      } catch (const std::exception& e) {
        ADD_FAILURE() << id << ": unexpected error: " << e.what();
      }
      continue;
    }
    // transformers raised: raise_exception() must give the same message; other Python errors
    // (TypeError, UndefinedError, ...) must be runtime errors here.
    const auto& err = c["error"];
    try {
      const std::string out = tpl.render(c["context"]);
      ADD_FAILURE() << id << ": rendered, but transformers raised " << err["type"] << ": " << err["message"];
    } catch (const jinja::TemplateRaisedError& e) {
      EXPECT_TRUE(err["raised"].get<bool>()) << id << ": raise_exception where transformers gave " << err["type"];
      if (err["raised"].get<bool>()) EXPECT_EQ(e.message(), err["message"].get<std::string>()) << id;
    } catch (const jinja::TemplateRuntimeError& e) {
      EXPECT_FALSE(err["raised"].get<bool>()) << id << ": runtime error " << e.what() << " where template raised "
                                              << err["message"];
    } catch (const std::exception& e) {
      ADD_FAILURE() << id << ": unexpected error kind: " << e.what();
    }
  }
  EXPECT_GT(checked, 0) << "no cases for " << name;
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, ChatTemplateParityByTemplate, ::testing::ValuesIn(kTemplates),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n;
                           for (char ch : info.param) n.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
                           return n;
                         });

// make_chat_template_context() must build the very variable set the cases recorded from
// transformers ({**special_tokens_map, **kwargs, messages, tools, documents, add_generation_prompt}).
TEST(ChatTemplateParity, ContextBuilderMatchesTransformersVariables) {
  int checked = 0;
  for (const auto& c : all_cases()) {
    if (c.contains("reference")) continue;  // rendered without apply_chat_template
    const ordered_json& ctx = c["context"];
    ordered_json special = ordered_json::object(), kwargs = ordered_json::object();
    for (auto it = ctx.begin(); it != ctx.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt") continue;
      (k.size() > 6 && (k.rfind("_token") == k.size() - 6 || k == "additional_special_tokens") ? special : kwargs)[k] =
          it.value();
    }
    const ordered_json built = make_chat_template_context(ctx["messages"], ctx["tools"],
                                                          ctx["add_generation_prompt"].get<bool>(), special, kwargs);
    EXPECT_EQ(built.dump(), ctx.dump()) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST(ChatTemplateParity, ContextBuilderRejectsReservedKwargs) {
  const ordered_json msgs = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_THROW(make_chat_template_context(msgs, nullptr, true, ordered_json::object(), {{"messages", 1}}),
               std::invalid_argument);
  EXPECT_THROW(make_chat_template_context(ordered_json::object(), nullptr, true, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(make_chat_template_context(msgs, ordered_json::object(), true, nullptr, nullptr), std::invalid_argument);
}

// The generation prompt of the Qwen3.5/3.6 templates, spelled out (docs/model-arch.md §5.2).
TEST(ChatTemplateQwen, GenerationPromptThinkingSwitch) {
  const ChatTemplate q36(test::read_text_file(test::chat_template_data_dir() + "/qwen3.6.jinja"));
  const ordered_json msgs = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  const auto render = [&](const ordered_json& kwargs) {
    return q36.render(make_chat_template_context(msgs, nullptr, true, {{"eos_token", "<|im_end|>"}}, kwargs));
  };
  EXPECT_EQ(render(ordered_json::object()), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(render({{"enable_thinking", false}}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateQwen, PreserveThinkingKeepsEarlierReasoning) {
  const ChatTemplate q36(test::read_text_file(test::chat_template_data_dir() + "/qwen3.6.jinja"));
  const ordered_json msgs = ordered_json::parse(R"([
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b", "reasoning_content": "r"},
    {"role": "user", "content": "c"}])");
  const std::string dropped = q36.render(make_chat_template_context(msgs, nullptr, false, nullptr, nullptr));
  const std::string kept =
      q36.render(make_chat_template_context(msgs, nullptr, false, nullptr, {{"preserve_thinking", true}}));
  EXPECT_EQ(dropped.find("<think>"), std::string::npos);
  EXPECT_NE(kept.find("<|im_start|>assistant\n<think>\nr\n</think>\n\nb<|im_end|>"), std::string::npos);
}

}  // namespace
}  // namespace fp4serve
