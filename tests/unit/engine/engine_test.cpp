// The engine on a real model (the tiny BF16 reference model): a request's tokens do not depend on
// what else runs, on the token budget, on prefix-cache hits or on preemption; stops, n > 1,
// cancellation and shutdown behave as vLLM's; nothing leaks.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/engine_error.h"
#include "engine/sampling_params.h"
#include "engine_model_util.h"
#include "model/state_arena.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

// Greedy tokens straight from the model (contiguous state, one token at a time after the prompt).
std::vector<std::int32_t> model_greedy(const model::Qwen35MoeModel& m, const std::vector<std::int32_t>& prompt,
                                       int n) {
  auto st = m.new_sequence(static_cast<int64_t>(prompt.size()) + n);
  std::vector<std::int32_t> out;
  std::vector<float> logits = m.forward({{&st, prompt, false}});
  for (int i = 0; i < n; ++i) {
    const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    if (i + 1 < n) {
      const std::vector<std::int32_t> next{best};
      logits = m.forward({{&st, next, false}});
    }
  }
  return out;
}

struct Case {
  std::vector<std::int32_t> prompt;
  int max_tokens;
};

std::vector<Case> mixed_cases(int count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(1, 200), out(4, 16);
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) cases.push_back({random_prompt(rng, len(rng)), out(rng)});
  // Shared prefixes: a few requests extend an earlier prompt (prefix-cache hits inside the batch).
  for (int i = 0; i < count / 4; ++i) {
    Case c = cases[static_cast<size_t>(i)];
    auto extra = random_prompt(rng, 1 + i * 3);
    c.prompt.insert(c.prompt.end(), extra.begin(), extra.end());
    cases.push_back(c);
  }
  return cases;
}

std::vector<std::vector<std::int32_t>> run_all(Engine& engine, const std::vector<Case>& cases) {
  std::vector<std::shared_ptr<OutputChannel>> chans;
  for (size_t i = 0; i < cases.size(); ++i)
    chans.push_back(engine.submit(greedy_request("r" + std::to_string(i), cases[i].prompt, cases[i].max_tokens)));
  std::vector<std::vector<std::int32_t>> out;
  for (auto& ch : chans) out.push_back(collect(*ch).tokens[0]);
  return out;
}

std::vector<std::vector<std::int32_t>> run_alone(const std::vector<Case>& cases) {
  EngineConfig c = small_engine_config();
  c.enable_prefix_caching = false;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  std::vector<std::vector<std::int32_t>> out;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto ch = engine.submit(greedy_request("a" + std::to_string(i), cases[i].prompt, cases[i].max_tokens));
    out.push_back(collect(*ch).tokens[0]);
  }
  return out;
}

TEST(Engine, AloneMatchesTheModelRunDirectly) {
  const std::vector<Case> cases = mixed_cases(3, 1);
  const auto alone = run_alone(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(alone[i], model_greedy(*tiny_model(), cases[i].prompt, cases[i].max_tokens)) << "case " << i;
}

TEST(Engine, GreedyOutputDoesNotDependOnBatchBudgetOrPrefixHits) {
  const std::vector<Case> cases = mixed_cases(32, 7);  // 32 mixed-length requests + 8 sharing prefixes
  const auto alone = run_alone(cases);
  for (int budget : {16, 64, 4096}) {
    EngineConfig c = small_engine_config();
    c.max_num_batched_tokens = budget;
    Engine engine(tiny_model(), qwen_tokenizer(), c);
    const auto batched = run_all(engine, cases);
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "budget " << budget << " case " << i;
    // Once more on a warm prefix cache: every prompt now hits.
    const auto again = run_all(engine, cases);
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(again[i], alone[i]) << "warm, budget " << budget << " case " << i;
    const EngineStats s = engine.stats();
    EXPECT_GT(s.scheduler.prefix_cache_hits, 0) << "budget " << budget;
    expect_no_leaks(engine);
  }
}

TEST(Engine, NextChatTurnResumesFromThePreviousTurnsState) {
  std::mt19937 rng(23);
  const auto prompt = random_prompt(rng, 100);
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  const Finished first = collect(*engine.submit(greedy_request("turn1", prompt, 20)));
  ASSERT_EQ(first.num_cached_tokens, 0);
  // Turn 2 = turn 1's prompt and answer plus the user's next message.
  std::vector<std::int32_t> turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens[0].begin(), first.tokens[0].end());
  const auto next = random_prompt(rng, 9);
  turn2.insert(turn2.end(), next.begin(), next.end());
  const Finished second = collect(*engine.submit(greedy_request("turn2", turn2, 12)));
  // The tail snapshot sits at the last block boundary turn 1 computed (119 tokens -> 112).
  EXPECT_EQ(second.num_cached_tokens, 112);
  EXPECT_EQ(second.tokens[0], run_alone({{turn2, 12}})[0]);
}

TEST(Engine, PreemptedRequestsResumeWithTheSameTokens) {
  const std::vector<Case> cases = mixed_cases(16, 11);
  const auto alone = run_alone(cases);
  EngineConfig c = small_engine_config();
  // KV for ~2 full-length requests but 16 slots: running requests outgrow the pool and get preempted.
  c.max_num_seqs = 16;
  c.max_model_len = 256;
  c.num_kv_blocks_override = 24;  // 384 tokens: a handful of the 24 requests at a time
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  const auto batched = run_all(engine, cases);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "case " << i;
  EXPECT_GT(engine.stats().scheduler.num_preemptions, 0) << "the pool was meant to be too small";
  expect_no_leaks(engine);
}

TEST(Engine, SeededSamplingIsTheSameWhateverTheBatch) {
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 40);
  auto seeded = [&](const std::string& id) {
    EngineRequest r = greedy_request(id, prompt, 12);
    r.params.temperature = 0.8;
    r.params.top_p = 0.9;
    r.params.top_k = 50;
    r.params.seed = 1234;
    r.params.logprobs = 3;
    SamplingLimits lim;
    lim.vocab_size = 512;
    EXPECT_FALSE(prepare_sampling_params(r.params, lim));
    return r;
  };
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  const Finished alone = collect(*engine.submit(seeded("alone")));
  std::vector<std::shared_ptr<OutputChannel>> others;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r = greedy_request("noise" + std::to_string(i), random_prompt(rng, 5 + 20 * i), 10);
    r.params.temperature = 1.0;
    others.push_back(engine.submit(std::move(r)));
  }
  const Finished batched = collect(*engine.submit(seeded("batched")));
  for (auto& ch : others) collect(*ch);
  EXPECT_EQ(alone.tokens[0], batched.tokens[0]);
  ASSERT_EQ(batched.logprobs[0].size(), 12u);
  EXPECT_EQ(batched.logprobs[0][0].top.size(), 3u);
  EXPECT_EQ(alone.logprobs[0][5].sampled.logprob, batched.logprobs[0][5].sampled.logprob);
}

TEST(Engine, StopStringAcrossTokensCutsTheTextAndEndsTheSequence) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 30);
  const Finished full = collect(*engine.submit(greedy_request("full", prompt, 24)));
  ASSERT_GE(full.text[0].size(), 6u);
  // A stop string that straddles the boundary between two generated tokens' text.
  auto tok = qwen_tokenizer();
  std::string first2 = tok->decode(std::vector<int32_t>{full.tokens[0][0], full.tokens[0][1], full.tokens[0][2]});
  const std::string piece0 = tok->decode(std::vector<int32_t>{full.tokens[0][0]});
  ASSERT_GT(first2.size(), piece0.size() + 1);
  const std::string stop = first2.substr(piece0.size() - 1 > 0 ? piece0.size() - 1 : 0, 3);
  EngineRequest r = greedy_request("stop", prompt, 24);
  r.params.stop = {stop};
  const Finished cut = collect(*engine.submit(r));
  EXPECT_EQ(cut.finish_reason[0], "stop");
  EXPECT_EQ(std::get<std::string>(cut.stop_reason[0]), stop);
  const size_t at = full.text[0].find(stop);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(cut.text[0], full.text[0].substr(0, at));
  EXPECT_LT(cut.tokens[0].size(), full.tokens[0].size());
  r.id = "stop-incl";
  r.params.include_stop_str_in_output = true;
  const Finished incl = collect(*engine.submit(r));
  EXPECT_EQ(incl.text[0], full.text[0].substr(0, at + stop.size()));
}

TEST(Engine, StopTokenIdsAndEosEndWithVllmStopReasons) {

  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 20);
  std::vector<std::int32_t> ref;
  {
    Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
    ref = collect(*engine.submit(greedy_request("ref", prompt, 10))).tokens[0];
  }
  EngineConfig c = small_engine_config();
  c.eos_token_id = ref[3];
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  EngineRequest r = greedy_request("eos", prompt, 10);
  r.params.ignore_eos = false;
  const Finished eos = collect(*engine.submit(r));
  EXPECT_EQ(eos.tokens[0].size(), static_cast<size_t>(std::find(ref.begin(), ref.end(), ref[3]) - ref.begin() + 1));
  EXPECT_EQ(eos.finish_reason[0], "stop");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(eos.stop_reason[0]));  // EOS: stop_reason null
  r.id = "stop-id";
  r.params.ignore_eos = true;
  r.params.stop_token_ids = {ref[2]};
  const Finished sid = collect(*engine.submit(r));
  EXPECT_EQ(sid.finish_reason[0], "stop");
  EXPECT_EQ(std::get<std::int64_t>(sid.stop_reason[0]), ref[2]);
  r.id = "min-tokens";
  r.params.stop_token_ids = {};
  r.params.ignore_eos = false;
  r.params.min_tokens = 6;  // EOS is masked until 6 tokens are out
  const Finished mt = collect(*engine.submit(r));
  EXPECT_GE(mt.tokens[0].size(), 6u);
}

TEST(Engine, NGreaterThanOneGivesIndexedSequencesAndSeededChildrenDiffer) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(13);
  EngineRequest r = greedy_request("n3", random_prompt(rng, 50), 8);
  r.params.n = 3;
  r.params.temperature = 1.0;
  r.params.seed = 42;
  const Finished f = collect(*engine.submit(r), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.tokens[i].size(), 8u) << i;
    EXPECT_EQ(f.finish_reason[i], "length") << i;
  }
  EXPECT_FALSE(f.tokens[0] == f.tokens[1] && f.tokens[1] == f.tokens[2]);
  // Child i of a seeded request is the same as a single request seeded with seed + i.
  EngineRequest single = r;
  single.id = "single";
  single.params.n = 1;
  single.params.seed = 43;
  EXPECT_EQ(collect(*engine.submit(single)).tokens[0], f.tokens[1]);
  expect_no_leaks(engine);
}

TEST(Engine, NoLeaksAfterManyRandomRequestsWithCancellations) {
  EngineConfig c = small_engine_config();
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> len(1, 40), out(1, 6), coin(0, 3);
  std::vector<std::pair<std::string, std::shared_ptr<OutputChannel>>> live;
  int finished = 0, aborted = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "x" + std::to_string(i);
    EngineRequest r = greedy_request(id, random_prompt(rng, len(rng)), out(rng));
    if (coin(rng) == 0) r.params.temperature = 1.0;
    live.emplace_back(id, engine.submit(std::move(r)));
    if (coin(rng) == 0) engine.abort(live[static_cast<size_t>(rng() % live.size())].first);
    if (live.size() >= 24) {
      for (auto& [lid, ch] : live) {
        const Finished f = collect(*ch);
        ++finished;
        aborted += f.finish_reason[0] == "abort";
      }
      live.clear();
    }
  }
  for (auto& [lid, ch] : live) {
    aborted += collect(*ch).finish_reason[0] == "abort";
    ++finished;
  }
  EXPECT_EQ(finished, 1000);
  EXPECT_GT(aborted, 0);
  expect_no_leaks(engine);
  const EngineStats s = engine.stats();
  std::int64_t total = 0;
  for (const auto& [reason, count] : s.requests_finished) total += count;
  EXPECT_EQ(total, 1000);
  EXPECT_GE(s.time_to_first_token.count() + static_cast<uint64_t>(aborted), 1000u);
  EXPECT_EQ(s.requests_finished.count("abort") ? s.requests_finished.at("abort") : 0, aborted);
}

TEST(Engine, ShutdownFinishesOrAbortsInFlightWorkWithAnError) {
  auto engine = std::make_unique<Engine>(tiny_model(), qwen_tokenizer(), small_engine_config());
  std::mt19937 rng(19);
  auto ch = engine->submit(greedy_request("long", random_prompt(rng, 100), 400));
  engine->shutdown(std::chrono::milliseconds(0));
  const Finished f = collect(*ch);
  ASSERT_TRUE(f.error.has_value());
  EXPECT_EQ(f.finish_reason[0], "abort");
  EXPECT_THROW(engine->submit(greedy_request("late", {1, 2, 3}, 2)), EngineRejected);
}

TEST(Engine, StallSwitchStopsProgressAndTheWatchdogSeesIt) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  engine.set_debug_stall(true);
  auto ch = engine.submit(greedy_request("s", {5, 6, 7}, 4));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const EngineStats s = engine.stats();
  EXPECT_TRUE(s.has_work);
  EXPECT_GE(std::chrono::steady_clock::now() - s.last_progress, std::chrono::milliseconds(150));
  EXPECT_FALSE(ch->closed());
  engine.set_debug_stall(false);
  EXPECT_EQ(collect(*ch).tokens[0].size(), 4u);
}

TEST(Engine, RefusesAnImpossibleConfigurationWithTheArithmetic) {
  EngineConfig c = small_engine_config();
  c.cache_memory_bytes = 1 << 20;
  try {
    Engine engine(tiny_model(), qwen_tokenizer(), c);
    FAIL() << "expected a refusal";
  } catch (const EngineConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-num-seqs 32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fp4serve::engine
