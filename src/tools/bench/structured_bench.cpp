#include "tools/bench/structured_bench.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "engine/structured/grammar_compiler.h"
#include "engine/structured/structured_output_state.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::tools::bench {

namespace {
using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}
}  // namespace

struct StructuredBench::Impl {
  std::unique_ptr<engine::GrammarCompiler> compiler;
  std::shared_ptr<const xgrammar::CompiledGrammar> grammar;
  std::shared_ptr<const std::vector<std::int32_t>> filter;
};

StructuredBench::StructuredBench(const std::string& file, std::shared_ptr<const tokenizer::Tokenizer> tok,
                                 std::int64_t logits_size, std::vector<std::int32_t> stop_token_ids)
    : impl_(std::make_unique<Impl>()), logits_size_(logits_size) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("--structured-schema: cannot read " + file);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(ss.str());
  if (!doc.contains("schema") || !doc.contains("instance"))
    throw std::runtime_error("--structured-schema: " + file + " must hold {\"schema\": ..., \"instance\": ...}");
  valid_vocab_ = std::min<std::int64_t>(logits_size, static_cast<std::int64_t>(tok->vocab_size()));
  instance_ = tok->encode(doc["instance"].dump(), /*add_special_tokens=*/false);
  if (!stop_token_ids.empty()) instance_.push_back(stop_token_ids.front());
  impl_->compiler = std::make_unique<engine::GrammarCompiler>(
      [tok, logits_size, stop_token_ids, this] {
        engine::GrammarVocabulary v;
        v.logits_size = static_cast<int>(logits_size);
        for (std::int64_t id = 0; id < valid_vocab_; ++id) v.token_bytes.push_back(tok->token_bytes(static_cast<std::int32_t>(id)));
        v.stop_token_ids = stop_token_ids;
        return v;
      },
      4);
  engine::StructuredOutputsParams p;
  p.kind = engine::StructuredOutputsParams::Kind::kJson;
  p.spec = doc["schema"].dump();
  // The vocabulary is built on the first compile: time a second, cache-free compile separately.
  const engine::CompiledConstraint first = impl_->compiler->compile(p).get();
  if (!first.grammar) throw std::runtime_error("--structured-schema: " + first.error);
  p.disable_any_whitespace = true;  // another key: compiled afresh
  compile_seconds_ = impl_->compiler->compile(p).get().compile_seconds;
  impl_->grammar = first.grammar;
  impl_->filter = first.token_filter;
}

StructuredBench::~StructuredBench() = default;

StructuredCost StructuredBench::measure(int batch, int steps, std::span<float> logits, kernels::Backend& backend) {
  const auto B = static_cast<std::size_t>(batch);
  std::vector<std::unique_ptr<engine::StructuredOutputState>> states(B);
  std::vector<std::vector<std::int32_t>> outputs(B);
  std::vector<std::size_t> at(B);
  auto restart = [&](std::size_t s) {
    states[s] = std::make_unique<engine::StructuredOutputState>(impl_->grammar, logits_size_,
                                                                std::vector<std::int32_t>{}, false, impl_->filter);
    outputs[s].clear();
  };
  for (std::size_t s = 0; s < B; ++s) {
    restart(s);
    // Different states per sequence: start each some way into the document.
    at[s] = (s * 7) % (instance_.size() - 1);
    for (std::size_t i = 0; i < at[s]; ++i) outputs[s].push_back(instance_[i]);
    if (states[s]->advance(outputs[s]) != engine::StructuredOutputState::Progress::kOk)
      throw std::runtime_error("structured bench: the instance does not match its schema");
  }

  kernels::SamplingOptions greedy;
  greedy.temperature = 0.0;
  std::vector<kernels::SampleRow> rows(B);
  std::vector<kernels::SampleResult> results(B);
  kernels::SamplingConfig cfg;
  cfg.vocab_size = logits_size_;
  cfg.valid_vocab_size = valid_vocab_;
  std::uint64_t draws = 0;
  cfg.engine_draws = &draws;
  const auto view = kernels::TensorView::contiguous(logits.data(), DType::kF32, {batch, logits_size_});

  StructuredCost c;
  for (int step = 0; step < steps; ++step) {
    // (b) the op with and without the masks, on the same rows.
    for (std::size_t s = 0; s < B; ++s) rows[s] = kernels::SampleRow{&greedy, {}, outputs[s], {}, {}};
    auto t0 = clock_type::now();
    backend.sample(view, rows, cfg, results);
    c.sample_ms_per_step += ms_since(t0);
    for (std::size_t s = 0; s < B; ++s) rows[s].token_bitmask = states[s]->mask();
    t0 = clock_type::now();
    backend.sample(view, rows, cfg, results);
    c.sample_masked_ms_per_step += ms_since(t0);
    // (a) every sequence takes its next document token and computes the mask after it.
    t0 = clock_type::now();
    for (std::size_t s = 0; s < B; ++s) {
      outputs[s].push_back(instance_[at[s]++]);
      if (states[s]->advance(outputs[s]) != engine::StructuredOutputState::Progress::kOk)
        throw std::runtime_error("structured bench: the instance does not match its schema");
    }
    c.mask_ms_per_step += ms_since(t0);
    for (std::size_t s = 0; s < B; ++s) {
      if (at[s] < instance_.size() && states[s]->constrained()) continue;
      restart(s);  // (not timed) the document is done: start it again
      at[s] = 0;
    }
  }
  c.mask_ms_per_step /= steps;
  c.sample_ms_per_step /= steps;
  c.sample_masked_ms_per_step /= steps;
  return c;
}

}  // namespace fp4serve::tools::bench
