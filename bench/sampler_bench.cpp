// The sampler (engine::Sampler over the CPU backend's sampling op) on Qwen3.6-sized rows: 248,320 logits (248,077 valid ids). BM_SampleOneRow's Time
// is the time per sampled token; BM_SampleBatch32 samples 32 rows per iteration. The logits
// imitate a language model's: a broad normal background and a few dozen leading tokens several
// nats above it.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using namespace fp4serve::engine;

constexpr int64_t kVocab = 248320;
constexpr int64_t kValid = 248077;

std::vector<float> lm_like_logits(uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> background(0.0f, 1.5f);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = background(gen);
  std::uniform_int_distribution<int64_t> id(0, kValid - 1);
  std::uniform_real_distribution<float> lead(8.0f, 14.0f);
  for (int i = 0; i < 30; ++i) logits[static_cast<std::size_t>(id(gen))] = lead(gen);
  return logits;
}

SamplerConfig qwen_config() {
  SamplerConfig c;
  c.vocab_size = kVocab;
  c.valid_vocab_size = kValid;
  c.eos_token_ids = {248046, 248044};
  c.seed = 1;
  c.num_threads = 1;
  return c;
}

enum Case : int64_t {
  kGreedy,
  kQwenDefaults,
  kTopPOnly,
  kFullVocab,
  kMinP,
  kQwenLogprobs,
  kQwenPenalties
};

SamplingParams params_for(int64_t c) {
  SamplingParams p;
  switch (c) {
    case kGreedy:
      p.temperature = 0.0;
      break;
    case kQwenDefaults:
      p.top_k = 20;
      p.top_p = 0.95;
      break;
    case kTopPOnly:
      p.top_p = 0.95;
      break;
    case kFullVocab:
      break;
    case kMinP:
      p.temperature = 0.7;
      p.min_p = 0.05;
      break;
    case kQwenLogprobs:
      p.top_k = 20;
      p.top_p = 0.95;
      p.logprobs = 20;
      break;
    case kQwenPenalties:
      p.top_k = 20;
      p.top_p = 0.95;
      p.repetition_penalty = 1.05;
      p.presence_penalty = 1.5;
      break;
    default:
      break;
  }
  return p;
}

const char* label_for(int64_t c) {
  switch (c) {
    case kGreedy:
      return "greedy";
    case kQwenDefaults:
      return "T1 top_k20 top_p0.95 (Qwen3.6 defaults)";
    case kTopPOnly:
      return "T1 top_p0.95";
    case kFullVocab:
      return "T1 full vocabulary";
    case kMinP:
      return "T0.7 min_p0.05";
    case kQwenLogprobs:
      return "Qwen3.6 defaults + logprobs 20";
    case kQwenPenalties:
      return "Qwen3.6 defaults + rep/presence penalties, 4k prompt + 1k output";
    default:
      return "?";
  }
}

void BM_SampleOneRow(benchmark::State& state) {
  Sampler sampler(qwen_config());
  std::vector<float> logits = lm_like_logits(7);
  SamplingParams p = params_for(state.range(0));
  p.seed = 3;
  std::vector<int32_t> prompt, output;
  if (state.range(0) == kQwenPenalties) {
    std::mt19937 gen(9);
    std::uniform_int_distribution<int32_t> id(0, kValid - 1);
    prompt.resize(4096);
    output.resize(1024);
    for (auto& t : prompt) t = id(gen);
    for (auto& t : output) t = id(gen);
  }
  const SampleInput in{logits, &p, prompt, output};
  for (auto _ : state) {
    auto out = sampler.sample(std::span<const SampleInput>(&in, 1));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());  // Time column = time per sample
  state.SetLabel(label_for(state.range(0)));
}
BENCHMARK(BM_SampleOneRow)
    ->DenseRange(kGreedy, kQwenPenalties)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A decode batch of 32 rows with Qwen3.6's defaults, rows in parallel. Arg: threads. The rows are
// one [32, vocab] buffer, as the model's logits are, so they reach the sampling op in one call.
void BM_SampleBatch32(benchmark::State& state) {
  SamplerConfig config = qwen_config();
  config.num_threads = static_cast<int>(state.range(0));
  Sampler sampler(config);
  std::vector<float> rows;
  for (uint32_t i = 0; i < 32; ++i) {
    const std::vector<float> row = lm_like_logits(100 + i);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  const SamplingParams p = params_for(kQwenDefaults);
  std::vector<SampleInput> batch;
  for (std::size_t i = 0; i < 32; ++i)
    batch.push_back({std::span<float>(rows).subspan(i * kVocab, kVocab), &p, {}, {}});
  for (auto _ : state) {
    auto out = sampler.sample(batch);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(32 * state.iterations());  // items_per_second = samples per second
}
BENCHMARK(BM_SampleBatch32)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
