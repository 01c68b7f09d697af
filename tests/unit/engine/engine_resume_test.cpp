// A request resumed on a fresh engine (the engine process died and was restarted) continues exactly
// where its client's stream stopped: greedy tokens and text as an undisturbed run, max_tokens and
// stop strings counted over the whole output, finished sequences of an n > 1 request not run again.
#include <gtest/gtest.h>

#include <random>

#include "engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

// What a client was sent of `full` after k tokens (the text of the first k deltas).
EngineRequest resumed_request(const std::string& id, const std::vector<std::int32_t>& prompt, int max_tokens,
                              const std::vector<std::int32_t>& sent, std::size_t sent_text_bytes) {
  EngineRequest r = greedy_request(id, prompt, max_tokens);
  ResumedSequence s;
  s.token_ids = sent;
  s.text_bytes = sent_text_bytes;
  r.resumed.push_back(s);
  return r;
}

// The text a client got with the first k tokens of `r` (the deltas' text).
std::size_t text_bytes_after(Engine& engine, EngineRequest r, int k) {
  r.id = "probe" + std::to_string(k) + r.id;
  auto ch = engine.submit(r);
  std::size_t bytes = 0;
  int tokens = 0;
  while (tokens < k) {
    auto out = ch->pop(std::chrono::seconds(120));
    if (!out) {
      ADD_FAILURE() << "no output";
      return 0;
    }
    for (const SequenceDelta& d : out->deltas) {
      tokens += static_cast<int>(d.token_ids.size());
      bytes += d.text.size();
    }
    if (out->finished) return bytes;
  }
  collect(*ch);
  return bytes;
}

TEST(EngineResume, GreedyContinuationEqualsTheUndisturbedRun) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 40);
  const Finished full = collect(*engine.submit(greedy_request("full", prompt, 20)));
  ASSERT_EQ(full.tokens[0].size(), 20u);
  for (int k : {1, 7, 19}) {
    const std::size_t bytes = text_bytes_after(engine, greedy_request("g", prompt, 20), k);
    const std::vector<std::int32_t> sent(full.tokens[0].begin(), full.tokens[0].begin() + k);
    const Finished rest =
        collect(*engine.submit(resumed_request("resumed" + std::to_string(k), prompt, 20, sent, bytes)));
    std::vector<std::int32_t> all = sent;
    all.insert(all.end(), rest.tokens[0].begin(), rest.tokens[0].end());
    EXPECT_EQ(all, full.tokens[0]) << "resumed after " << k;
    EXPECT_EQ(full.text[0].substr(0, bytes) + rest.text[0], full.text[0]) << "resumed after " << k;
    EXPECT_EQ(rest.finish_reason[0], "length");
    EXPECT_FALSE(rest.prompt_logprobs[0]) << "prompt logprobs were sent with the first token already";
  }
  expect_no_leaks(engine);
}

TEST(EngineResume, StopStringStraddlingTheResumePointStillStops) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 30);
  const Finished full = collect(*engine.submit(greedy_request("full", prompt, 24)));
  ASSERT_GE(full.text[0].size(), 12u);
  // A stop string of the text of tokens 4..6: resumed after token 5, it spans the resume point.
  auto tok = qwen_tokenizer();
  const std::string head = tok->decode(std::vector<int32_t>(full.tokens[0].begin(), full.tokens[0].begin() + 4));
  const std::string upto6 = tok->decode(std::vector<int32_t>(full.tokens[0].begin(), full.tokens[0].begin() + 6));
  ASSERT_GT(upto6.size(), head.size() + 1);
  const std::string stop = upto6.substr(head.size(), upto6.size() - head.size());
  EngineRequest fresh = greedy_request("fresh", prompt, 24);
  fresh.params.stop = {stop};
  const Finished cut = collect(*engine.submit(fresh));
  ASSERT_EQ(cut.finish_reason[0], "stop");
  // Resumed after 5 tokens, with the text sent so far (the stop-string window holds back its end).
  const std::size_t bytes = text_bytes_after(engine, fresh, 5);
  const std::vector<std::int32_t> sent(full.tokens[0].begin(), full.tokens[0].begin() + 5);
  EngineRequest r = resumed_request("resumed", prompt, 24, sent, bytes);
  r.params.stop = {stop};
  const Finished rest = collect(*engine.submit(r));
  EXPECT_EQ(rest.finish_reason[0], "stop");
  EXPECT_EQ(cut.text[0].substr(0, bytes) + rest.text[0], cut.text[0]);
  EXPECT_EQ(sent.size() + rest.tokens[0].size(), cut.tokens[0].size());
}

TEST(EngineResume, StructuredOutputContinuesFromTheMatcherAdvancedOverTheSentTokens) {
  EngineConfig c = small_engine_config();
  c.eos_token_id = 0;  // "!" stands in for EOS (structured_engine_test.cpp)
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  std::mt19937 rng(21);
  EngineRequest r = greedy_request("json", random_prompt(rng, 12), 96);
  r.params.ignore_eos = false;
  StructuredOutputsParams so;
  so.kind = StructuredOutputsParams::Kind::kJson;
  so.spec = R"({"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}},)"
            R"("required":["ok","n"]})";
  so.disable_any_whitespace = true;
  r.params.structured_outputs = so;
  const Finished full = collect(*engine.submit(r));
  ASSERT_FALSE(full.error);
  ASSERT_GE(full.tokens[0].size(), 6u);
  const int k = 4;
  const std::size_t bytes = text_bytes_after(engine, r, k);
  EngineRequest resumed = r;
  resumed.id = "json-resumed";
  resumed.resumed.push_back({0, std::vector<std::int32_t>(full.tokens[0].begin(), full.tokens[0].begin() + k), bytes,
                             false});
  const Finished rest = collect(*engine.submit(resumed));
  ASSERT_FALSE(rest.error);
  std::vector<std::int32_t> all(full.tokens[0].begin(), full.tokens[0].begin() + k);
  all.insert(all.end(), rest.tokens[0].begin(), rest.tokens[0].end());
  EXPECT_EQ(all, full.tokens[0]);
  EXPECT_EQ(full.text[0].substr(0, bytes) + rest.text[0], full.text[0]);
  EXPECT_EQ(rest.finish_reason[0], full.finish_reason[0]);
}

TEST(EngineResume, FinishedSequencesOfAnNRequestAreNotRunAgain) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 20);
  EngineRequest r = greedy_request("n2", prompt, 8);
  r.params.n = 2;
  ResumedSequence done;
  done.index = 0;
  done.finished = true;
  done.token_ids = {1, 2, 3};
  r.resumed.push_back(done);
  const Finished f = collect(*engine.submit(r), 2);
  EXPECT_TRUE(f.tokens[0].empty()) << "sequence 0 had finished before the restart";
  EXPECT_EQ(f.tokens[1].size(), 8u);
  EXPECT_EQ(f.finish_reason[1], "length");
  expect_no_leaks(engine);
}

}  // namespace
}  // namespace fp4serve::engine
