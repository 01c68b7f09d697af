// The CUDA sampling op's device code (sampling_select.cuh: the very functions its kernels run),
// block by block under the CPU block emulation (cuda_block_emulation.h), with the op's host half
// (sampling_pack.h), against the CPU op: the same tokens, ranks and top lists, logprobs within the
// contract's 1e-5, the same engine counter, and the logits back unchanged. What it cannot show is
// left to the GPU tests (BackendOps.Sample*): the hardware's memory model, launches and copies.
// Built with -fsanitize=thread, this file also turns a missing __syncthreads into a reported data
// race (checked by hand: clean; with the barrier after apply_edits removed, TSan reports the race):
//   g++ -O1 -g -fsanitize=thread -std=c++20 -DFP4SERVE_HAVE_CUDA=1 -Isrc -Itests -isystem
//   /usr/local/cuda/include tests/unit/kernels/cuda_sampling_emulation_test.cpp <kernels_tests'
//   link line from build.ninja> (about 2 minutes to run).
#if defined(FP4SERVE_HAVE_CUDA)

#include "unit/kernels/cuda_block_emulation.h"  // first: the device code below compiles against it

#include "kernels/cuda/sampling_select.cuh"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/sampling_cpu.h"
#include "kernels/cuda/sampling_pack.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cuda {
namespace {

using namespace sampling_select;
namespace emu = ::fp4serve::cuda_emulation;

// CudaBackend::sample with its launches emulated one block at a time (shared memory poisoned
// before each block, as a real block's is uninitialised).
void emulated_sample(float* logits, int64_t stride, std::span<const SampleRow> rows, const SamplingConfig& config,
                     std::span<SampleResult> out) {
  cpu::check_sample_call(rows, config, out);
  PackedSampling p;
  pack_sampling(rows, config, stride, p);
  std::vector<float> saved(p.edits.size());
  std::vector<SampleRowResult> results(rows.size());
  std::vector<SampleTopEntry> tops(static_cast<std::size_t>(p.top_entries));
  const KernelArgs a{
      logits,       p.rows.data(),  p.edits.data(), p.biases.data(), p.masks.data(), p.logprob_ids.data(),
      saved.data(), results.data(), tops.data(),    p.valid,         p.fixed_scale};
  auto sh = std::make_unique<Shared>();
  auto launch = [&](auto body) {
    for (unsigned r = 0; r < rows.size(); ++r) {
      std::memset(static_cast<void*>(sh.get()), 0xA5, sizeof(Shared));
      emu::run_block(kSampleThreads, r, [&] { body(*sh); });
    }
  };
  launch([&](Shared& s) { select_row<kPathGreedyOrPlain>(a, s); });
  launch([&](Shared& s) { select_row<kPathTopK>(a, s); });
  launch([&](Shared& s) { select_row<kPathTopP>(a, s); });
  launch([&](Shared& s) { logprobs_row(a, s); });
  unpack_sampling(p, rows, results, tops, out);
  std::vector<std::vector<float>> host_rows(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (p.rows[r].logprobs == kLogprobsHost)
      host_rows[r].assign(logits + p.rows[r].logits_offset, logits + p.rows[r].logits_offset + p.valid);
  finish_host_logprobs(p, rows, host_rows, config, out);
}

struct Row {
  SamplingOptions options;
  std::vector<int32_t> prompt, output, bitmask;
};

// Runs `rows` (logits `vocab` long, `valid` of them tokens) on the CPU op and the emulated CUDA op
// and compares everything the contract fixes.
// Gaussian logits; grid > 0: rounded to multiples of it (many exact ties).
std::function<std::vector<float>(std::size_t)> gaussian(int64_t vocab, uint32_t seed, float scale, float grid = 0.0f) {
  return [=](std::size_t r) {
    std::vector<float> row =
        testing::random_logits(static_cast<std::size_t>(vocab), seed + static_cast<uint32_t>(r), scale);
    if (grid > 0.0f)
      for (float& x : row) x = std::round(x / grid) * grid;
    return row;
  };
}

void expect_same_as_cpu(const std::vector<Row>& batch, int64_t vocab, int64_t valid,
                        const std::function<std::vector<float>(std::size_t)>& make_row) {
  const std::size_t n = batch.size();
  const int64_t stride = vocab + 8;
  std::vector<float> logits(n * static_cast<std::size_t>(stride), -3.0f);
  for (std::size_t r = 0; r < n; ++r) {
    const std::vector<float> row = make_row(r);
    std::copy(row.begin(), row.end(),
              logits.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(stride)));
  }
  const std::vector<float> before = logits;
  auto run = [&](bool on_cuda, std::vector<std::vector<TokenLogprob>>& top, uint64_t& draws) {
    std::vector<float> work = before;
    top.assign(n, {});
    std::vector<SampleRow> rows;
    for (std::size_t r = 0; r < n; ++r) {
      top[r].assign(static_cast<std::size_t>(batch[r].options.top_entries(valid)), TokenLogprob{});
      rows.push_back(SampleRow{&batch[r].options, batch[r].prompt, batch[r].output, top[r], batch[r].bitmask});
    }
    std::vector<SampleResult> out(n);
    const SamplingConfig config{vocab, valid, 1234, &draws, 1};
    if (on_cuda)
      emulated_sample(work.data(), stride, rows, config, out);
    else
      cpu::sample_rows(work.data(), stride, rows, config, out);
    EXPECT_EQ(std::memcmp(work.data(), before.data(), work.size() * sizeof(float)), 0) << "logits restored";
    return out;
  };
  std::vector<std::vector<TokenLogprob>> want_top, got_top;
  uint64_t want_draws = 5, got_draws = 5;
  const std::vector<SampleResult> want = run(false, want_top, want_draws);
  const std::vector<SampleResult> got = run(true, got_top, got_draws);
  EXPECT_EQ(got_draws, want_draws);
  for (std::size_t r = 0; r < n; ++r) {
    EXPECT_EQ(got[r].token, want[r].token) << "row " << r;
    EXPECT_EQ(got[r].has_logprobs, want[r].has_logprobs) << "row " << r;
    if (got[r].logprob != want[r].logprob) EXPECT_NEAR(got[r].logprob, want[r].logprob, 1e-5) << "row " << r;
    EXPECT_EQ(got[r].rank, want[r].rank) << "row " << r;
    ASSERT_EQ(got[r].num_top, want[r].num_top) << "row " << r;
    for (int64_t i = 0; i < want[r].num_top; ++i) {
      const auto k = static_cast<std::size_t>(i);
      ASSERT_EQ(got_top[r][k].token, want_top[r][k].token) << "row " << r << " top " << i;
      if (got_top[r][k].logprob != want_top[r][k].logprob)  // -inf (masked) equals itself only
        ASSERT_NEAR(got_top[r][k].logprob, want_top[r][k].logprob, 1e-5) << "row " << r << " top " << i;
    }
  }
}

std::vector<int32_t> grammar_words(int64_t vocab, uint32_t seed) {
  std::vector<int32_t> words(static_cast<std::size_t>((vocab + 31) / 32));
  uint32_t x = seed;
  for (int32_t& w : words) {
    x = x * 1664525u + 1013904223u;
    w = static_cast<int32_t>(x | 0x00010001u);
  }
  return words;
}

TEST(CudaSamplingEmulation, EveryKindOfRowAsTheCpuOp) {
  constexpr int64_t vocab = 1000, valid = 990;
  std::vector<Row> b(10);
  b[0].options.temperature = 0.0;  // greedy under every processor, all logprobs (on the device)
  b[0].options.repetition_penalty = 1.3, b[0].options.frequency_penalty = 0.4, b[0].options.presence_penalty = 0.2;
  b[0].options.logit_bias = {{17, 0.8f}, {5, -3.0f}, {17, 0.5f}};
  b[0].options.bad_words = {{9}, {7, 8, 4}};
  b[0].options.min_tokens = 5, b[0].options.min_tokens_stop_ids = {3, 11};
  b[0].options.logprobs = -1;
  b[0].prompt = {4, 5, 6, 17}, b[0].output = {7, 8};
  b[1].options.seed = 42, b[1].options.top_p = 0.9, b[1].options.logprobs = 5;  // top-p alone
  b[1].output = {7, 7, 8};
  b[2].options.seed = 7, b[2].options.temperature = 0.7, b[2].options.top_k = 40, b[2].options.min_p = 0.05;
  b[2].options.top_p = 0.8;
  b[3].options.top_k = 50, b[3].options.logprobs = 2;                                      // unseeded
  b[4].options.seed = 1234567, b[4].options.temperature = 1.4, b[4].options.logprobs = 0;  // plain
  b[5].options.seed = 99, b[5].options.temperature = 1.2;  // allowed ids, named logprob ids
  b[5].options.allowed_token_ids = {5, 17, 40, 300};
  b[5].options.logprob_token_ids = {17, 5, 995, 17};
  b[6].options.temperature = 0.0;  // a spent thinking budget under a grammar that forbids its token
  b[6].options.reasoning_budget.budget = 1;
  b[6].options.reasoning_budget.start_ids = {60};
  b[6].options.reasoning_budget.end_ids = {61};
  summarize_prompt(b[6].options.reasoning_budget, std::vector<int32_t>{4, 60});
  b[6].prompt = {4, 60}, b[6].output = {9};
  b[6].bitmask = grammar_words(vocab, 3);
  b[6].bitmask[61 / 32] &= ~static_cast<int32_t>(1u << (61 % 32));
  b[6].options.logprobs = 3;
  b[7].options.seed = 5, b[7].options.top_p = 0.3, b[7].options.min_p = 0.1;  // grammar, random
  b[7].bitmask = grammar_words(vocab, 8);
  b[7].options.logprobs = 4;
  b[8].options.seed = 8, b[8].options.top_k = 1;  // top-k 1: the max alone
  b[9].options.min_p = 0.2;                       // unseeded plain with min_p
  expect_same_as_cpu(b, vocab, valid, gaussian(vocab, 10, 0.5f));
}

TEST(CudaSamplingEmulation, TiesMasksAndALongTopNAsTheCpuOp) {
  // Wide logits rounded to a grid (many exact ties), a top-N past the device's ranking (the host
  // path), large k, tiny top-p.
  constexpr int64_t vocab = 2600, valid = 2500;
  std::vector<Row> b(6);
  b[0].options.seed = 1, b[0].options.top_k = 700, b[0].options.top_p = 0.97, b[0].options.logprobs = -1;
  b[1].options.seed = 2, b[1].options.top_p = 0.01, b[1].options.logprobs = 20;
  b[2].options.seed = 3, b[2].options.temperature = 2.0, b[2].options.logprobs = 1024;
  b[3].options.seed = 4, b[3].options.top_k = 3, b[3].options.temperature = 0.3;
  b[4].options.temperature = 0.0, b[4].options.logprobs = 7;
  b[4].bitmask = grammar_words(vocab, 77);
  b[5].options.seed = 6, b[5].options.top_p = 0.6, b[5].options.temperature = 0.8;
  expect_same_as_cpu(b, vocab, valid, gaussian(vocab, 200, 3.0f, 0.25f));
}

TEST(CudaSamplingEmulation, TiedTokensAreDrawnInTheCpuOpsOrder) {
  // 30 tokens tied at the top and 20 just below, spread over the row: which of the tied tokens a
  // uniform picks depends on the walk's order (rank, then id; or id order for the plain draw).
  constexpr int64_t vocab = 700, valid = 690;
  std::vector<Row> b;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    for (int kind = 0; kind < 4; ++kind) {
      Row row;
      row.options.seed = seed * 31 + static_cast<uint64_t>(kind);
      if (kind == 0) row.options.top_k = 40;                              // shared-memory top-k
      if (kind == 1) row.options.top_k = 600;                             // radix top-k
      if (kind == 2) row.options.top_p = 0.7;                             // buckets, ties in the cut
      if (kind == 3) row.options.min_p = 0.5, row.options.logprobs = 35;  // plain, id order
      b.push_back(row);
    }
  }
  expect_same_as_cpu(b, vocab, valid, [](std::size_t r) {
    std::vector<float> row(static_cast<std::size_t>(vocab), -5.0f);
    for (std::size_t j = 0; j < 30; ++j) row[(j * 23 + r) % valid] = 2.0f;
    for (std::size_t j = 0; j < 20; ++j) row[(j * 29 + 7 + r) % valid] = 1.5f;
    return row;
  });
}

TEST(CudaSamplingEmulation, RandomOptionsAsTheCpuOp) {
  constexpr int64_t vocab = 3000, valid = 2950;
  std::mt19937 gen(2024);
  auto pick = [&gen](auto... v) {
    const std::array values{v...};
    return values[gen() % values.size()];
  };
  std::vector<Row> b(14);
  for (Row& row : b) {
    SamplingOptions& o = row.options;
    o.temperature = pick(0.0, 0.3, 0.7, 1.0, 1.5);
    o.top_k = pick(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{20}, int64_t{100}, int64_t{800});
    o.top_p = pick(1.0, 1.0, 0.95, 0.5);
    o.min_p = pick(0.0, 0.0, 0.05);
    if (gen() % 3 != 0) o.seed = gen();
    const int lp = pick(-2, -2, 0, 5, 20, 1500);
    if (lp >= 0) o.logprobs = lp;
    if (gen() % 3 == 0) o.repetition_penalty = 1.1, o.frequency_penalty = 0.2, o.presence_penalty = 0.3;
    if (gen() % 3 == 0) o.logit_bias = {{static_cast<int32_t>(gen() % valid), 3.0f}};
    row.prompt = {1, 2, 3, 500, 2990};
    row.output = {500, 7, 7};
  }
  expect_same_as_cpu(b, vocab, valid, gaussian(vocab, 900, 2.0f));
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
