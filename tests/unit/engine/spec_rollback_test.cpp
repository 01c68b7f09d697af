// The GDN rollback and KV truncation of verify steps, on the tiny real model and checked byte for
// byte: a scheduler, model runner and sampler stepped by hand (as the engine steps them) with drafts
// that are partly wrong. After every step the request's GDN slot holds exactly the bytes a run without
// drafts had at the same length, and every KV row of a kept position is the plain run's row.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/step_sampling.h"
#include "engine_model_util.h"
#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;
using Bytes = std::vector<std::uint8_t>;

struct Driver {
  Driver(const StackConfig& c, const model::Qwen35MoeModel& m)
      : model(m),
        st(c),
        runner(m, ModelRunnerConfig{c.num_blocks, c.block_size, kernels::KvDtype::kBf16, c.num_slots, c.num_snapshots,
                                    c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len,
                                    c.num_speculative_tokens}),
        sampler(SamplerConfig{m.vocab_size(), m.vocab_size(), {}, 0, 1}) {}

  const std::vector<StepResult>& step() {
    const SchedulerOutput& out = st.sched.schedule();
    const kernels::TensorView logits = runner.execute(out);
    sampling.build(out, std::span<float>(logits.as<float>(), static_cast<std::size_t>(logits.numel())),
                   static_cast<std::size_t>(model.vocab_size()),
                   [&](const Request& r) { return &params.at(r.id()); });
    const std::vector<SampleOutput> sampled = sampler.sample(sampling.inputs());
    const auto& results = st.sched.update_from_emitted(sampling.accept(out, sampled));
    runner.apply_verify_outcomes(out);
    return results;
  }

  Bytes slot_bytes(int slot) {
    Bytes b;
    const kernels::GdnDims& d = model.gdn_dims();
    for (int l = 0; l < static_cast<int>(model.config().num_linear_attention_layers()); ++l) {
      const model::GdnStateRef ref = runner.state_slots().ref(slot, l);
      const auto* conv = reinterpret_cast<const std::uint8_t*>(ref.conv);
      const auto* ssm = reinterpret_cast<const std::uint8_t*>(ref.ssm);
      b.insert(b.end(), conv, conv + d.conv_state_elems() * 2);
      b.insert(b.end(), ssm, ssm + d.state_elems() * 4);
    }
    return b;
  }

  // K and V of position p in every attention layer.
  Bytes kv_row(const Request& r, int p) {
    Bytes b;
    for (int l = 0; l < static_cast<int>(model.config().num_full_attention_layers()); ++l) {
      const kernels::KvView v = runner.kv_cache().view(l, r.res.block_ids, 1.0f, 1.0f);
      const std::size_t row = static_cast<std::size_t>(v.n_kv_heads) * v.head_dim * 2;
      const std::size_t at = (static_cast<std::size_t>(r.res.block_ids[static_cast<std::size_t>(p / v.block_size)]) *
                                  static_cast<std::size_t>(v.block_size) +
                              static_cast<std::size_t>(p % v.block_size)) * row;
      b.insert(b.end(), static_cast<const std::uint8_t*>(v.k) + at, static_cast<const std::uint8_t*>(v.k) + at + row);
      b.insert(b.end(), static_cast<const std::uint8_t*>(v.v) + at, static_cast<const std::uint8_t*>(v.v) + at + row);
    }
    return b;
  }

  const model::Qwen35MoeModel& model;
  Stack st;
  ModelRunner runner;
  Sampler sampler;
  StepSampling sampling;
  std::map<std::string, SamplingParams> params;
};

StackConfig rollback_stack() {
  StackConfig c;
  c.block_size = 4;
  c.num_blocks = 64;
  c.max_model_len = 128;
  c.max_num_batched_tokens = 64;
  c.num_snapshots = 16;
  c.snapshot_interval = 8;
  c.num_speculative_tokens = 5;
  return c;
}

SamplingParams params_for(bool seeded) {
  SamplingParams p;
  p.ignore_eos = true;
  p.temperature = 0.0;
  if (seeded) {
    p.temperature = 0.9;
    p.top_k = 40;
    p.seed = 5;
    p.repetition_penalty = 1.2;
    p.presence_penalty = 0.3;
  }
  return p;
}

class SpecRollback : public ::testing::TestWithParam<bool> {};

TEST_P(SpecRollback, GdnStateAndKvRowsEqualThePlainRunAtEveryLength) {
  const auto m = tiny_model();
  const std::vector<std::int32_t> prompt = iota_tokens(11, 20);
  const int max_tokens = 40;
  // The plain run: the slot's bytes at every computed length, the KV row of every position.
  std::map<int, Bytes> state_at;
  std::map<int, Bytes> row_at;
  std::vector<std::int32_t> plain_tokens;
  {
    Driver plain(rollback_stack(), *m);
    plain.params["r"] = params_for(GetParam());
    Request& r = plain.st.sched.add_request("r", prompt, max_tokens);
    while (plain.st.sched.has_unfinished_requests()) {
      const auto& results = plain.step();
      for (const StepResult& res : results) plain_tokens.push_back(res.token);
      if (!results.empty() && results.back().finished) break;
      state_at[r.num_computed_tokens] = plain.slot_bytes(r.res.state_slot);
      for (int p = 0; p < r.num_computed_tokens; ++p)
        if (!row_at.count(p)) row_at[p] = plain.kv_row(r, p);
    }
  }
  ASSERT_EQ(plain_tokens.size(), static_cast<std::size_t>(max_tokens));

  Driver spec(rollback_stack(), *m);
  spec.params["r"] = params_for(GetParam());
  Request& r = spec.st.sched.add_request("r", prompt, max_tokens);
  std::vector<std::int32_t> tokens;
  int step = 0, rejections = 0;
  while (true) {
    const auto& results = spec.step();
    for (const StepResult& res : results) tokens.push_back(res.token);
    if (!results.empty() && results.back().finished) break;
    const int n = r.num_computed_tokens;
    ASSERT_TRUE(state_at.count(n)) << n;
    EXPECT_TRUE(spec.slot_bytes(r.res.state_slot) == state_at[n]) << "GDN state after " << n << " tokens";
    for (int p = 0; p < n; ++p) ASSERT_TRUE(spec.kv_row(r, p) == row_at.at(p)) << "KV row " << p << " at length " << n;
    // Drafts: the plain run's next tokens, one of them wrong, moving through the positions.
    const auto out = r.output_token_ids();
    r.draft_token_ids.clear();
    const int wrong = step++ % 6;  // 5: all right
    for (int j = 0; j < 5 && out.size() + static_cast<std::size_t>(j) < plain_tokens.size(); ++j) {
      const std::int32_t t = plain_tokens[out.size() + static_cast<std::size_t>(j)];
      r.draft_token_ids.push_back(j == wrong ? (t + 3) % 200 : t);
    }
    rejections += wrong < static_cast<int>(r.draft_token_ids.size());
  }
  EXPECT_EQ(tokens, plain_tokens);
  EXPECT_GT(rejections, 2);
  const SpecDecodeMetrics s = spec.st.sched.metrics().spec_decode;
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
}

INSTANTIATE_TEST_SUITE_P(Sampling, SpecRollback, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "seeded" : "greedy"; });

}  // namespace
}  // namespace fp4serve::engine
