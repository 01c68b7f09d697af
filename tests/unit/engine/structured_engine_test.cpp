// Structured output through the engine on the tiny model with the real Qwen tokenizer (its first 512
// ids: every byte and the commonest merges): a constrained request's text is in the grammar's
// language, its tokens do not depend on what else runs in the batch or on speculative drafts, and a
// constraint that fails to compile ends the request with the reason instead of reaching the model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "engine/drafter.h"
#include "unit/engine/engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

constexpr std::int32_t kEos = 0;  // "!" stands in for EOS: the tiny model's vocabulary has none

EngineConfig structured_config() {
  EngineConfig c = small_engine_config();
  c.eos_token_id = kEos;
  return c;
}

EngineRequest json_request(std::string id, std::vector<std::int32_t> prompt) {
  EngineRequest r = greedy_request(std::move(id), std::move(prompt), 96);
  r.params.ignore_eos = false;
  StructuredOutputsParams so;
  so.kind = StructuredOutputsParams::Kind::kJson;
  so.spec = R"({"type":"object","properties":{"ok":{"type":"boolean"},"size":{"enum":["S","M","L"]},)"
            R"("n":{"type":"integer","minimum":0,"maximum":9}},"required":["ok","size","n"]})";
  so.disable_any_whitespace = true;  // a random model would otherwise pad with whitespace forever
  r.params.structured_outputs = so;
  return r;
}

EngineRequest regex_request(std::string id, std::vector<std::int32_t> prompt) {
  EngineRequest r = greedy_request(std::move(id), std::move(prompt), 32);
  r.params.ignore_eos = false;
  r.params.temperature = 0.8;
  r.params.seed = 11;
  StructuredOutputsParams so;
  so.kind = StructuredOutputsParams::Kind::kRegex;
  so.spec = "[a-f]{4}-[0-9]{2}";
  r.params.structured_outputs = so;
  return r;
}

// The output's own text (the streamed text may begin with the dangling bytes of a random prompt's
// last token), without the stop token.
std::string output_text(const Finished& f) {
  std::vector<std::int32_t> ids = f.tokens[0];
  if (!ids.empty() && ids.back() == kEos) ids.pop_back();
  return qwen_tokenizer()->decode(ids);
}

void expect_valid_json(const Finished& f) {
  ASSERT_FALSE(f.error) << *f.error;
  ASSERT_EQ(f.finish_reason[0], "stop") << f.text[0];
  const auto j = nlohmann::json::parse(output_text(f));
  EXPECT_TRUE(j.at("ok").is_boolean());
  EXPECT_TRUE(j.at("size") == "S" || j.at("size") == "M" || j.at("size") == "L");
  EXPECT_GE(j.at("n").get<int>(), 0);
  EXPECT_LE(j.at("n").get<int>(), 9);
}

TEST(StructuredEngine, ConstrainedOutputIsInTheLanguageAndIndependentOfTheBatch) {
  std::mt19937 rng(3);
  const auto p1 = random_prompt(rng, 20), p2 = random_prompt(rng, 33);
  Finished alone_json, alone_regex;
  {
    Engine engine(tiny_model(), qwen_tokenizer(), structured_config());
    alone_json = collect(*engine.submit(json_request("j", p1)));
    alone_regex = collect(*engine.submit(regex_request("r", p2)));
    expect_no_leaks(engine);
  }
  expect_valid_json(alone_json);
  ASSERT_EQ(alone_regex.finish_reason[0], "stop");
  ASSERT_EQ(alone_regex.tokens[0].back(), kEos);
  const std::string regex_text = output_text(alone_regex);
  EXPECT_TRUE(std::regex_match(regex_text, std::regex("[a-f]{4}-[0-9]{2}"))) << regex_text;

  // The same two among unconstrained requests and other schemas, all at once.
  Engine engine(tiny_model(), qwen_tokenizer(), structured_config());
  std::vector<std::shared_ptr<OutputChannel>> others;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = i % 2 ? greedy_request("u" + std::to_string(i), random_prompt(rng, 10 + i), 24)
                            : json_request("o" + std::to_string(i), random_prompt(rng, 15 + i));
    others.push_back(engine.submit(std::move(r)));
  }
  auto j = engine.submit(json_request("j", p1));
  auto r = engine.submit(regex_request("r", p2));
  const Finished batched_json = collect(*j), batched_regex = collect(*r);
  for (auto& ch : others) {
    const Finished f = collect(*ch);
    EXPECT_FALSE(f.error);
  }
  EXPECT_EQ(batched_json.tokens, alone_json.tokens);
  EXPECT_EQ(batched_regex.tokens, alone_regex.tokens);
  expect_no_leaks(engine);
}

// Proposes the reference continuation with every other draft replaced by a token the grammar refuses.
class MixedDrafter : public Drafter {
 public:
  explicit MixedDrafter(std::vector<std::int32_t> ref) : ref_(std::move(ref)) {}
  void propose(const DraftRequest& r, int max_tokens, std::vector<std::int32_t>& out) override {
    for (int j = 0; j < max_tokens; ++j) {
      const std::size_t p = r.output_token_ids.size() + static_cast<std::size_t>(j);
      out.push_back(p < ref_.size() && (p + static_cast<std::size_t>(j)) % 3 != 2 ? ref_[p] : 123);
    }
  }

 private:
  std::vector<std::int32_t> ref_;
};

TEST(StructuredEngine, SpeculativeDraftsNeverChangeTheConstrainedOutput) {
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 25);
  Finished plain;
  {
    Engine engine(tiny_model(), qwen_tokenizer(), structured_config());
    plain = collect(*engine.submit(json_request("j", prompt)));
  }
  expect_valid_json(plain);
  EngineConfig c = structured_config();
  c.drafter = std::make_shared<MixedDrafter>(plain.tokens[0]);
  c.num_speculative_tokens = 3;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  const Finished spec = collect(*engine.submit(json_request("j", prompt)));
  EXPECT_EQ(spec.tokens, plain.tokens);
  expect_no_leaks(engine);
}

TEST(StructuredEngine, AConstraintThatFailsToCompileEndsTheRequestWithItsReason) {
  Engine engine(tiny_model(), qwen_tokenizer(), structured_config());
  std::mt19937 rng(9);
  EngineRequest r = greedy_request("bad", random_prompt(rng, 8), 8);
  StructuredOutputsParams so;
  so.kind = StructuredOutputsParams::Kind::kStructuralTag;
  so.spec = "{}";
  r.params.structured_outputs = so;
  const Finished f = collect(*engine.submit(std::move(r)));
  ASSERT_TRUE(f.error);
  EXPECT_NE(f.error->find("structural_tag"), std::string::npos) << *f.error;
  EXPECT_TRUE(f.tokens[0].empty());
  // The engine is unharmed.
  const Finished ok = collect(*engine.submit(json_request("ok", random_prompt(rng, 8))));
  expect_valid_json(ok);
  expect_no_leaks(engine);
}

}  // namespace
}  // namespace fp4serve::engine
