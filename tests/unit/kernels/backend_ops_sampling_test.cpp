// The backend op harness (backend_ops_harness.h) on sampling at the model's own row length (Qwen3.6:
// 248,320 logits, 248,077 of them tokens), with a row of every kind the engine sends: greedy under
// every processor, Qwen's recommended top-k 20 / top-p 0.95 / temperature 0.7, top-p alone, min_p,
// the plain draw, allowed ids with named logprob ids, a grammar, and a top-N too long for a GPU's
// on-device ranking. The small case is BackendOps.Sample (backend_ops_test.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"

namespace fp4serve::kernels::test::ops {
namespace {

template <class T>
Output values_output(const std::string& name, const std::vector<T>& v) {
  Output o;
  o.name = name;
  o.bytes.resize(v.size() * sizeof(T));
  std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
  for (const T& x : v) o.values.push_back(static_cast<double>(x));
  return o;
}

TEST(BackendOps, SampleAtTheModelsVocabulary) {
  Harness h;
  constexpr int64_t V = 248320, valid = 248077;
  for (const int64_t R : {int64_t{1}, int64_t{9}}) {
    h.check({"sample", cat("rows=", R, " V=", V, " valid=", valid), OpClass::kMath, kNmseExactMath,
             [=](Backend& b, uint32_t seed) {
               std::vector<float> logits = random_f32(static_cast<std::size_t>(R * V), seed, 3.0f);
               // A few confident tokens per row, so top-p keeps a small nucleus on some rows.
               for (int64_t r = 0; r < R; ++r)
                 for (int64_t j = 0; j < 4; ++j)
                   logits[static_cast<std::size_t>(r * V + (r * 7919 + j * 104729) % valid)] += 9.0f;
               DeviceTensor l = upload(b, DType::kF32, {R, V}, logits, "logits");
               std::vector<SamplingOptions> opt(9);
               opt[0].temperature = 0;
               opt[0].repetition_penalty = 1.2, opt[0].frequency_penalty = 0.3, opt[0].presence_penalty = 0.4;
               opt[0].logit_bias = {{11, 5.0f}, {248000, -2.0f}};
               opt[0].bad_words = {{7}, {42, 43}};
               opt[0].logprobs = 20;
               opt[1].temperature = 0.7, opt[1].top_k = 20, opt[1].top_p = 0.95, opt[1].seed = 5, opt[1].logprobs = 5;
               opt[2].top_p = 0.8, opt[2].seed = 9, opt[2].logprobs = 20;
               opt[3].min_p = 0.05, opt[3].temperature = 0.9, opt[3].seed = 3, opt[3].min_tokens = 10;
               opt[3].min_tokens_stop_ids = {1, 2, 248044};
               // opt[4]: unseeded, temperature 1, the whole vocabulary: a draw of the engine generator
               opt[5].seed = 17, opt[5].allowed_token_ids = {3, 99, 5000, 200000, 248076};
               opt[5].logprob_token_ids = {99, 248100, 3};
               opt[6].temperature = 0;  // under the grammar below
               opt[6].logprobs = 3;
               opt[7].temperature = 1.3, opt[7].top_k = 3000, opt[7].seed = 21, opt[7].logprobs = 1500;
               opt[8].temperature = 0.6, opt[8].top_k = 50, opt[8].min_p = 0.02;  // unseeded
               std::vector<int32_t> grammar(static_cast<std::size_t>(V / 32), 0);
               for (std::size_t w = 0; w < grammar.size(); w += 3) grammar[w] = static_cast<int32_t>(0x0f0f0f0fu);
               const std::vector<int32_t> prompt = {1, 5, 9, 200, 11, 11}, generated = {7, 42, 11};
               std::vector<std::vector<TokenLogprob>> top(static_cast<std::size_t>(R));
               std::vector<SampleRow> rows(static_cast<std::size_t>(R));
               for (int64_t r = 0; r < R; ++r) {
                 const SamplingOptions& o = opt[static_cast<std::size_t>(R == 1 ? 1 : r)];
                 auto& t = top[static_cast<std::size_t>(r)];
                 t.assign(static_cast<std::size_t>(o.top_entries(valid)), TokenLogprob{});
                 rows[static_cast<std::size_t>(r)] = {&o, prompt, generated, t};
                 if (R > 1 && r == 6) rows[static_cast<std::size_t>(r)].token_bitmask = grammar;
               }
               uint64_t draws = 0;
               SamplingConfig cfg;
               cfg.vocab_size = V, cfg.valid_vocab_size = valid, cfg.seed = seed, cfg.engine_draws = &draws;
               std::vector<SampleResult> res(static_cast<std::size_t>(R));
               b.sample(l.view, rows, cfg, res);
               std::vector<int64_t> ints;
               std::vector<float> lps;
               for (const SampleResult& x : res) {
                 ints.insert(ints.end(), {x.token, x.has_logprobs, x.rank, x.num_top});
                 lps.push_back(x.logprob);
               }
               for (const auto& t : top)
                 for (const TokenLogprob& e : t) ints.push_back(e.token), lps.push_back(e.logprob);
               ints.push_back(static_cast<int64_t>(draws));
               return std::vector<Output>{values_output("tokens, ranks, top ids, draws", ints),
                                          values_output("logprobs", lps), download(b, l.view, "logits after")};
             }});
  }
}

// 64 rows, each with its own random options (every filter, seeded or not, penalties, bias,
// logprobs), at a shorter row so that the CPU columns stay fast: the batch a decode step sends.
TEST(BackendOps, SampleSixtyFourRowsOfRandomOptions) {
  Harness h;
  constexpr int64_t V = 20000, valid = 19900, R = 64;
  h.check({"sample", cat("rows=", R, " V=", V, " random options"), OpClass::kMath, kNmseExactMath,
           [=](Backend& b, uint32_t seed) {
             const std::vector<float> logits = random_f32(static_cast<std::size_t>(R * V), seed, 2.5f);
             DeviceTensor l = upload(b, DType::kF32, {R, V}, logits, "logits");
             std::mt19937 gen(seed);
             auto pick = [&gen](auto... v) {
               const std::array values{v...};
               return values[gen() % values.size()];
             };
             std::vector<SamplingOptions> opt(static_cast<std::size_t>(R));
             for (SamplingOptions& o : opt) {
               o.temperature = pick(0.0, 0.3, 0.7, 1.0, 1.5);
               o.top_k = pick(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{20}, int64_t{100}, int64_t{3000});
               o.top_p = pick(1.0, 1.0, 0.95, 0.5);
               o.min_p = pick(0.0, 0.0, 0.05);
               if (gen() % 3 != 0) o.seed = gen();
               const int lp = pick(-2, -2, 0, 5, 20);
               if (lp >= 0) o.logprobs = lp;
               if (gen() % 4 == 0) o.repetition_penalty = 1.1, o.frequency_penalty = 0.2, o.presence_penalty = 0.3;
               if (gen() % 4 == 0) o.logit_bias = {{static_cast<int32_t>(gen() % valid), 3.0f}};
             }
             const std::vector<int32_t> prompt = {1, 2, 3, 500, 19000}, generated = {500, 7, 7};
             std::vector<std::vector<TokenLogprob>> top(static_cast<std::size_t>(R));
             std::vector<SampleRow> rows(static_cast<std::size_t>(R));
             for (std::size_t r = 0; r < rows.size(); ++r) {
               top[r].assign(static_cast<std::size_t>(opt[r].top_entries(valid)), TokenLogprob{});
               rows[r] = {&opt[r], prompt, generated, top[r]};
             }
             uint64_t draws = 0;
             SamplingConfig cfg;
             cfg.vocab_size = V, cfg.valid_vocab_size = valid, cfg.seed = seed, cfg.engine_draws = &draws;
             std::vector<SampleResult> res(rows.size());
             b.sample(l.view, rows, cfg, res);
             std::vector<int64_t> ints;
             std::vector<float> lps;
             for (const SampleResult& x : res) {
               ints.insert(ints.end(), {x.token, x.has_logprobs, x.rank, x.num_top});
               lps.push_back(x.logprob);
             }
             for (const auto& t : top)
               for (const TokenLogprob& e : t) ints.push_back(e.token), lps.push_back(e.logprob);
             ints.push_back(static_cast<int64_t>(draws));
             return std::vector<Output>{values_output("tokens, ranks, top ids, draws", ints),
                                        values_output("logprobs", lps), download(b, l.view, "logits after")};
           }});
}

// A bad call is refused with std::invalid_argument on every backend before anything is touched:
// the engine counter keeps its value and the logits their bytes.
TEST(BackendOps, SampleRefusesBadCallsOnEveryBackend) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    SCOPED_TRACE(col.spec.name);
    Backend& b = *col.backend;
    constexpr int64_t V = 64;
    const std::vector<float> host = random_f32(2 * V, 3, 2.0f);
    DeviceTensor l = upload(b, DType::kF32, {2, V}, host, "logits");
    SamplingOptions unseeded, named;
    named.seed = 1;
    named.logprob_token_ids = {3, static_cast<int32_t>(V)};  // past the row
    std::vector<TokenLogprob> top(2);
    std::vector<SampleRow> rows{{&unseeded, {}, {}, {}}, {&named, {}, {}, top}};
    std::vector<SampleResult> out(2);
    uint64_t draws = 9;
    SamplingConfig cfg;
    cfg.vocab_size = V, cfg.valid_vocab_size = V - 4, cfg.seed = 1, cfg.engine_draws = &draws;
    EXPECT_THROW(b.sample(l.view, rows, cfg, out), std::invalid_argument);  // logprob id outside the row
    named.logprob_token_ids = {3};
    SamplingConfig bad_vocab = cfg;
    bad_vocab.valid_vocab_size = V + 1;
    EXPECT_THROW(b.sample(l.view, rows, bad_vocab, out), std::invalid_argument);
    SamplingConfig no_counter = cfg;
    no_counter.engine_draws = nullptr;
    EXPECT_THROW(b.sample(l.view, rows, no_counter, out), std::invalid_argument);
    SamplingConfig wrong_row = cfg;
    wrong_row.vocab_size = V + 32, wrong_row.valid_vocab_size = V;
    EXPECT_THROW(b.sample(l.view, rows, wrong_row, out), std::invalid_argument);  // logits are [2, V]
    std::vector<SampleResult> one(1);
    EXPECT_THROW(b.sample(l.view, rows, cfg, one), std::invalid_argument);
    EXPECT_EQ(draws, 9u);
    for (const SampleResult& x : out) EXPECT_EQ(x.token, -1);
    const Output after = download(b, l.view, "logits");
    EXPECT_EQ(std::memcmp(after.bytes.data(), host.data(), host.size() * sizeof(float)), 0);
    b.sample(l.view, rows, cfg, out);  // the same call, made good
    EXPECT_EQ(draws, 10u);
    EXPECT_LT(out[0].token, V - 4);
    EXPECT_EQ(out[1].num_top, 1);
  }
}


// Backend::sample_async, waited for after another (synchronous) sample call, as the engine's async
// scheduling uses it (the fork children's first tokens are sampled in between): the results are the
// synchronous op's, bit for bit, and the unseeded rows' engine draws are taken at the launch.
TEST(BackendOps, SampleAsyncWaitedForLaterIsTheSynchronousOp) {
  Harness h;
  constexpr int64_t V = 20000, valid = 19900, R = 16;
  h.check({"sample_async", cat("rows=", R, " V=", V, " then a sample, then the wait"), OpClass::kMath,
           kNmseExactMath, [=](Backend& b, uint32_t seed) {
             const std::vector<float> a_host = random_f32(static_cast<std::size_t>(R * V), seed, 2.5f);
             const std::vector<float> b_host = random_f32(static_cast<std::size_t>(2 * V), seed + 1, 2.5f);
             DeviceTensor a = upload(b, DType::kF32, {R, V}, a_host, "logits");
             DeviceTensor other = upload(b, DType::kF32, {2, V}, b_host, "other logits");
             std::vector<SamplingOptions> opt(static_cast<std::size_t>(R));
             for (std::size_t r = 0; r < opt.size(); ++r) {
               SamplingOptions& o = opt[r];
               o.temperature = r % 4 == 0 ? 0.0 : 0.8;
               o.top_k = r % 3 == 0 ? 40 : 0;
               o.top_p = r % 5 == 0 ? 0.9 : 1.0;
               if (r % 2 == 0) o.seed = 1000 + r;  // the odd rows draw from the engine generator
               if (r % 3 != 2) o.logprobs = static_cast<int64_t>(r % 6);
               if (r % 4 == 1) o.repetition_penalty = 1.2, o.presence_penalty = 0.3;
             }
             const std::vector<int32_t> prompt = {1, 2, 3, 500}, generated = {500, 7, 7};
             auto rows_of = [&](std::vector<std::vector<TokenLogprob>>& top, std::size_t n) {
               std::vector<SampleRow> rows(n);
               top.assign(n, {});
               for (std::size_t r = 0; r < n; ++r) {
                 top[r].assign(static_cast<std::size_t>(opt[r].top_entries(valid)), TokenLogprob{});
                 rows[r] = {&opt[r], prompt, generated, top[r]};
               }
               return rows;
             };
             SamplingConfig cfg;
             cfg.vocab_size = V, cfg.valid_vocab_size = valid, cfg.seed = seed;
             // The pipelined order: launch, another call, wait.
             uint64_t draws = 0;
             cfg.engine_draws = &draws;
             std::vector<std::vector<TokenLogprob>> top_async, top_between, top_sync;
             const std::vector<SampleRow> rows_async = rows_of(top_async, R);
             const std::vector<SampleRow> rows_between = rows_of(top_between, 2);
             std::vector<SampleResult> res_async(R), res_between(2), res_sync(R);
             const Backend::SampleTicket ticket = b.sample_async(a.view, rows_async, cfg, res_async);
             const uint64_t draws_at_launch = draws;
             b.sample(other.view, rows_between, cfg, res_between);
             b.wait_sample(ticket);
             // The same rows through the synchronous op, from the same generator position.
             uint64_t draws_sync = 0;
             cfg.engine_draws = &draws_sync;
             b.sample(a.view, rows_of(top_sync, R), cfg, res_sync);
             EXPECT_EQ(draws_at_launch, draws_sync) << "the launch took the rows' draws";
             std::vector<int64_t> ints;
             std::vector<float> lps;
             for (std::size_t r = 0; r < res_async.size(); ++r) {
               EXPECT_EQ(res_async[r].token, res_sync[r].token) << "row " << r;
               EXPECT_EQ(res_async[r].logprob, res_sync[r].logprob) << "row " << r;
               EXPECT_EQ(res_async[r].rank, res_sync[r].rank) << "row " << r;
               for (std::size_t t = 0; t < top_async[r].size(); ++t) {
                 EXPECT_EQ(top_async[r][t].token, top_sync[r][t].token) << "row " << r;
                 EXPECT_EQ(top_async[r][t].logprob, top_sync[r][t].logprob) << "row " << r;
               }
               ints.insert(ints.end(), {res_async[r].token, res_async[r].rank, res_async[r].num_top});
               lps.push_back(res_async[r].logprob);
             }
             for (const SampleResult& x : res_between) ints.push_back(x.token);
             ints.push_back(static_cast<int64_t>(draws));
             return std::vector<Output>{values_output("tokens, ranks, draws", ints), values_output("logprobs", lps),
                                        download(b, a.view, "logits after")};
           }});
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
