// Async scheduling (EngineConfig::async_scheduling, vLLM's --async-scheduling): the pipelined loop
// (complete N -> launch N+1 -> process N's outputs) gives every request exactly the outputs of the
// synchronous loop -- tokens, text, logprobs, finish and stop reasons -- over mixed workloads (stop
// strings that end a request while its next step is already launched, max_tokens, n > 1, seeded
// sampling, penalties, prefix hits, preemption under a small KV cache, structured output, aborts),
// and the token of a request ended late is never sent nor counted. On the CPU backend the step runs
// to completion inside launch, but the ordering, the late-stop discard and the bookkeeping are the
// same code as on a GPU.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/drafter.h"
#include "unit/engine/engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

// A request a late stop ended is freed when the step in flight completes, just after its final
// output: wait for that before checking that nothing is held.
void expect_no_leaks_soon(const Engine& engine) {
  for (int i = 0; i < 2000 && engine.stats().has_work; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  expect_no_leaks(engine);
}

EngineRequest prepared(EngineRequest r) {
  SamplingLimits lim;
  lim.vocab_size = 512;
  EXPECT_FALSE(prepare_sampling_params(r.params, lim));
  return r;
}

// The greedy text of `prompt` on the tiny model, to pick stop strings that end a request mid-output.
std::string greedy_text(const std::vector<std::int32_t>& prompt, int max_tokens) {
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  return collect(*engine.submit(greedy_request("probe", prompt, max_tokens))).text[0];
}

struct Workload {
  std::vector<EngineRequest> requests;
  std::vector<int> n;
};

Workload mixed_workload() {
  std::mt19937 rng(77);
  Workload w;
  auto add = [&](EngineRequest r) {
    w.n.push_back(static_cast<int>(std::max<std::int64_t>(1, r.params.n)));
    w.requests.push_back(prepared(std::move(r)));
  };
  const auto shared = random_prompt(rng, 70);
  // Stop strings found at several depths of the output: each ends its request while its next step is
  // in flight (the token that step samples must not reach the client).
  for (int i = 0; i < 4; ++i) {
    const auto prompt = random_prompt(rng, 12 + 9 * i);
    const std::string text = greedy_text(prompt, 20);
    EngineRequest r = greedy_request("stop" + std::to_string(i), prompt, 20);
    const std::size_t at = std::min<std::size_t>(text.size() - 2, 2 + 3 * static_cast<std::size_t>(i));
    r.params.stop = {text.substr(at, 2)};
    r.params.include_stop_str_in_output = i % 2 == 1;
    add(std::move(r));
  }
  for (int i = 0; i < 4; ++i) add(greedy_request("len" + std::to_string(i), random_prompt(rng, 5 + 40 * i), 3 + 5 * i));
  {
    EngineRequest r = greedy_request("n3", random_prompt(rng, 30), 9);
    r.params.n = 3;
    r.params.temperature = 0.9;
    r.params.seed = 5;
    r.params.logprobs = 2;
    add(std::move(r));
  }
  {
    EngineRequest r = greedy_request("seeded", random_prompt(rng, 44), 14);
    r.params.temperature = 0.8;
    r.params.top_p = 0.9;
    r.params.top_k = 40;
    r.params.seed = 1234;
    r.params.logprobs = 3;
    add(std::move(r));
  }
  {
    EngineRequest r = greedy_request("penalties", random_prompt(rng, 25), 16);
    r.params.temperature = 0.7;
    r.params.seed = 99;
    r.params.presence_penalty = 0.5;
    r.params.frequency_penalty = 0.4;
    r.params.repetition_penalty = 1.3;
    add(std::move(r));
  }
  // Prefix hits: the same long prompt, and one extending it.
  add(greedy_request("shared-a", shared, 8));
  {
    auto longer = shared;
    const auto extra = random_prompt(rng, 20);
    longer.insert(longer.end(), extra.begin(), extra.end());
    add(greedy_request("shared-b", longer, 8));
  }
  {
    EngineRequest r = greedy_request("stop-id", random_prompt(rng, 18), 12);
    const std::string text = greedy_text(r.prompt_token_ids, 12);
    r.params.stop_token_ids = {};
    r.params.min_tokens = 2;
    r.params.stop = {text.substr(text.size() / 2, 1)};
    add(std::move(r));
  }
  return w;
}

struct RunResult {
  std::map<std::string, Finished> finished;
  EngineStats stats;
};

// Submits everything while the engine is stalled, so both loops see the same arrivals in one step.
RunResult run(const Workload& w, EngineConfig c, bool async) {
  c.async_scheduling = async;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  engine.set_debug_stall(true);
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (const EngineRequest& r : w.requests) channels.push_back(engine.submit(r));
  while (engine.stats().scheduler.num_waiting < static_cast<int>(w.requests.size()))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.set_debug_stall(false);
  RunResult out;
  for (std::size_t i = 0; i < channels.size(); ++i)
    out.finished[w.requests[i].id] = collect(*channels[i], w.n[i]);
  expect_no_leaks_soon(engine);
  out.stats = engine.stats();
  return out;
}

void expect_same(const Finished& a, const Finished& b, const std::string& id) {
  EXPECT_EQ(a.tokens, b.tokens) << id;
  EXPECT_EQ(a.text, b.text) << id;
  EXPECT_EQ(a.finish_reason, b.finish_reason) << id;
  EXPECT_EQ(a.stop_reason, b.stop_reason) << id;
  EXPECT_EQ(a.error, b.error) << id;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << id;
  for (std::size_t s = 0; s < a.logprobs.size(); ++s) {
    ASSERT_EQ(a.logprobs[s].size(), b.logprobs[s].size()) << id;
    for (std::size_t t = 0; t < a.logprobs[s].size(); ++t) {
      EXPECT_EQ(a.logprobs[s][t].sampled.token, b.logprobs[s][t].sampled.token) << id;
      EXPECT_EQ(a.logprobs[s][t].sampled.logprob, b.logprobs[s][t].sampled.logprob) << id;
      EXPECT_EQ(a.logprobs[s][t].top.size(), b.logprobs[s][t].top.size()) << id;
    }
  }
}

TEST(AsyncScheduling, MixedWorkloadGivesTheSynchronousOutputsBitForBit) {
  const Workload w = mixed_workload();
  const RunResult sync = run(w, small_engine_config(), false);
  const RunResult async = run(w, small_engine_config(), true);
  for (const EngineRequest& r : w.requests) expect_same(async.finished.at(r.id), sync.finished.at(r.id), r.id);
  for (int i = 0; i < 4; ++i) {
    const std::string id = "stop" + std::to_string(i);
    EXPECT_EQ(sync.finished.at(id).finish_reason[0], "stop") << id;
    EXPECT_LT(sync.finished.at(id).tokens[0].size(), 20u) << id << ": the stop string was meant to hit";
  }
  EXPECT_EQ(sync.finished.at("shared-b").num_cached_tokens, async.finished.at("shared-b").num_cached_tokens);
  // The tokens a late stop discarded are not generated tokens: the counters match too.
  EXPECT_EQ(async.stats.scheduler.generation_tokens, sync.stats.scheduler.generation_tokens);
  EXPECT_EQ(async.stats.scheduler.prompt_tokens_computed, sync.stats.scheduler.prompt_tokens_computed);
}

// Drafts the request's last token repeated: some verify steps keep drafts, most reject them.
class RepeatDrafter : public Drafter {
 public:
  void propose(const DraftRequest& r, int max_tokens, std::vector<std::int32_t>& out) override {
    for (int j = 0; j < max_tokens; ++j) out.push_back(r.output_token_ids.empty() ? 1 : r.output_token_ids.back());
  }
};

TEST(AsyncScheduling, SpeculativeDecodingGivesTheSynchronousOutputs) {
  // The drafts are proposed in the complete phase, before the next step is scheduled: verify steps,
  // their rollbacks and a late stop inside a verify step pipeline like plain decodes.
  const Workload w = mixed_workload();
  EngineConfig c = small_engine_config();
  c.drafter = std::make_shared<RepeatDrafter>();
  c.num_speculative_tokens = 2;
  const RunResult sync = run(w, c, false);
  const RunResult async = run(w, c, true);
  for (const EngineRequest& r : w.requests) expect_same(async.finished.at(r.id), sync.finished.at(r.id), r.id);
  EXPECT_GT(async.stats.scheduler.spec_decode.num_drafts, 0);
  EXPECT_EQ(async.stats.scheduler.generation_tokens, sync.stats.scheduler.generation_tokens);
  EXPECT_EQ(async.stats.scheduler.spec_decode.num_drafts, sync.stats.scheduler.spec_decode.num_drafts);
  EXPECT_EQ(async.stats.scheduler.spec_decode.num_accepted_tokens, sync.stats.scheduler.spec_decode.num_accepted_tokens);
}

TEST(AsyncScheduling, LateStopNeverSendsTheTokenOfTheStepInFlight) {
  std::mt19937 rng(31);
  const auto prompt = random_prompt(rng, 24);
  const std::string text = greedy_text(prompt, 16);
  EngineConfig c = small_engine_config();
  c.async_scheduling = true;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  const Finished full = collect(*engine.submit(greedy_request("full", prompt, 16)));
  EngineRequest r = greedy_request("late", prompt, 16);
  r.params.stop = {text.substr(4, 3)};
  const Finished cut = collect(*engine.submit(prepared(r)));
  ASSERT_EQ(cut.finish_reason[0], "stop");
  // The stop string is found when the token completing it is processed, with the next step already
  // launched for the request: its sampled token is dropped, so the request has exactly the tokens
  // up to the one completing the stop string, a prefix of the full output.
  ASSERT_LT(cut.tokens[0].size(), full.tokens[0].size());
  EXPECT_TRUE(std::equal(cut.tokens[0].begin(), cut.tokens[0].end(), full.tokens[0].begin()));
  EXPECT_EQ(cut.text[0], text.substr(0, text.find(r.params.stop[0])));
  // Generated tokens counted: the full request's and the cut one's, not the discarded one.
  EXPECT_EQ(engine.stats().scheduler.generation_tokens,
            static_cast<std::int64_t>(full.tokens[0].size() + cut.tokens[0].size()));
  expect_no_leaks_soon(engine);
}

TEST(AsyncScheduling, PreemptionUnderASmallKvCacheGivesTheSynchronousOutputs) {
  std::mt19937 rng(41);
  Workload w;
  for (int i = 0; i < 12; ++i) {
    // Short prompts all admitted at once, long outputs: their decodes outgrow the pool.
    EngineRequest r = greedy_request("p" + std::to_string(i), random_prompt(rng, 8 + 3 * i), 50 + i);
    if (i % 3 == 0) {
      r.params.temperature = 0.9;
      r.params.seed = 100 + i;
    }
    w.n.push_back(1);
    w.requests.push_back(prepared(std::move(r)));
  }
  EngineConfig c = small_engine_config();
  c.max_num_seqs = 12;
  c.max_model_len = 256;
  c.num_kv_blocks_override = 24;
  const RunResult sync = run(w, c, false);
  const RunResult async = run(w, c, true);
  for (const EngineRequest& r : w.requests) expect_same(async.finished.at(r.id), sync.finished.at(r.id), r.id);
  EXPECT_GT(async.stats.scheduler.num_preemptions, 0) << "the pool was meant to be too small";
}

TEST(AsyncScheduling, StructuredOutputGivesTheSynchronousOutputs) {
  std::mt19937 rng(3);
  Workload w;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = greedy_request("json" + std::to_string(i), random_prompt(rng, 15 + 7 * i), 64);
    r.params.ignore_eos = false;
    StructuredOutputsParams so;
    so.kind = StructuredOutputsParams::Kind::kRegex;
    so.spec = "[a-f]{3}-[0-9]{2}";
    r.params.structured_outputs = so;
    if (i == 1) {
      r.params.temperature = 0.8;
      r.params.seed = 11;
    }
    w.n.push_back(1);
    w.requests.push_back(std::move(r));
  }
  w.n.push_back(1);
  w.requests.push_back(greedy_request("plain", random_prompt(rng, 30), 12));
  EngineConfig c = small_engine_config();
  c.eos_token_id = 0;
  const RunResult sync = run(w, c, false);
  const RunResult async = run(w, c, true);
  for (const EngineRequest& r : w.requests) expect_same(async.finished.at(r.id), sync.finished.at(r.id), r.id);
  EXPECT_EQ(sync.finished.at("json0").finish_reason[0], "stop");
}

TEST(AsyncScheduling, AbortsWhileAStepRunsEndWithAbortAndLeaveTheOthersUnchanged) {
  std::mt19937 rng(53);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy_request("a" + std::to_string(i), random_prompt(rng, 10 + 5 * i), 40));
  std::map<std::string, Finished> sync;
  {
    Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
    std::vector<std::shared_ptr<OutputChannel>> chs;
    for (const auto& r : reqs) chs.push_back(engine.submit(r));
    for (std::size_t i = 0; i < reqs.size(); ++i) sync[reqs[i].id] = collect(*chs[i]);
  }
  EngineConfig c = small_engine_config();
  c.async_scheduling = true;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  std::vector<std::shared_ptr<OutputChannel>> chs;
  for (const auto& r : reqs) chs.push_back(engine.submit(r));
  // Aborts arrive while the engine steps (their timing is the client's): requests 1 and 4 end with
  // "abort" after a prefix of their tokens; the rest are untouched.
  while (engine.stats().num_steps < 4) std::this_thread::sleep_for(std::chrono::microseconds(200));
  engine.abort("a1");
  engine.abort("a4");
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const Finished f = collect(*chs[i]);
    const Finished& ref = sync.at(reqs[i].id);
    if ((i == 1 || i == 4) && f.finish_reason[0] == "abort") {
      EXPECT_LT(f.tokens[0].size(), ref.tokens[0].size()) << i;
      EXPECT_TRUE(std::equal(f.tokens[0].begin(), f.tokens[0].end(), ref.tokens[0].begin())) << i;
    } else {
      expect_same(f, ref, reqs[i].id);  // untouched, or it finished before the abort reached it
    }
  }
  expect_no_leaks_soon(engine);
}

}  // namespace
}  // namespace fp4serve::engine
