// Encode throughput of the Qwen3.5/3.6 tokenizer on the 1 MB mixed corpus
// (tests/data/tokenizer/mixed_1mb.txt.gz), one thread. bench/tokenizer_vs_hf.sh compares it with
// HF tokenizers on the same file.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace {

using fp4serve::tokenizer::Tokenizer;

const Tokenizer& qwen35() {
  static const std::unique_ptr<Tokenizer> tok =
      Tokenizer::load(std::filesystem::path(FP4SERVE_SOURCE_DIR) / ".cache" / "tokenizers" / "qwen3.5");
  return *tok;
}

const std::string& mixed_1mb() {
  static const std::string text = fp4serve::tokenizer::read_maybe_gzipped(
      std::filesystem::path(FP4SERVE_SOURCE_DIR) / "tests" / "data" / "tokenizer" / "mixed_1mb.txt.gz");
  return text;
}

void BM_Encode1MB(benchmark::State& state) {
  const Tokenizer& tok = qwen35();
  const std::string& text = mixed_1mb();
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(text.size()));
  state.counters["tokens"] = double(tokens);
}
BENCHMARK(BM_Encode1MB)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Decode1MB(benchmark::State& state) {
  const Tokenizer& tok = qwen35();
  const auto ids = tok.encode(mixed_1mb());
  for (auto _ : state) {
    auto text = tok.decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(ids.size()));
}
BENCHMARK(BM_Decode1MB)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
