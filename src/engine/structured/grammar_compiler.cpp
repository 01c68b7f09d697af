#include "engine/structured/grammar_compiler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include <spdlog/spdlog.h>
#include <xgrammar/xgrammar.h>

#include "engine/structured/grammar_builder.h"
#include "engine/structured/structured_output_state.h"

namespace fp4serve::engine {

namespace {

// CompiledConstraint::token_filter: every token without a control byte (CR and LF allowed), stop
// tokens included; padding ids past the vocabulary excluded.
std::vector<std::int32_t> json_token_filter(const GrammarVocabulary& v) {
  std::vector<std::int32_t> mask(bitmask_words(v.logits_size), 0);
  auto allow = [&](std::size_t id) { mask[id / 32] |= static_cast<std::int32_t>(1u << (id % 32)); };
  for (std::size_t id = 0; id < v.token_bytes.size(); ++id) {
    const std::string& b = v.token_bytes[id];
    const bool control = std::any_of(b.begin(), b.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return u < 0x20 && u != '\n' && u != '\r';
    });
    if (!control) allow(id);
  }
  for (std::int32_t id : v.stop_token_ids) allow(static_cast<std::size_t>(id));
  return mask;
}

}  // namespace

struct GrammarCompiler::Impl {
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
  std::shared_ptr<const std::vector<std::int32_t>> json_filter;
  explicit Impl(const GrammarVocabulary& v)
      : info(v.token_bytes, xgrammar::VocabType::RAW, v.logits_size, v.stop_token_ids),
        // Our own LRU caches whole results; xgrammar's cache would hold them a second time.
        compiler(info, /*max_threads=*/2, /*cache_enabled=*/false),
        json_filter(std::make_shared<const std::vector<std::int32_t>>(json_token_filter(v))) {}
};

GrammarCompiler::GrammarCompiler(std::function<GrammarVocabulary()> vocabulary, std::size_t cache_capacity,
                                 std::function<void()> on_ready)
    : vocabulary_(std::move(vocabulary)), on_ready_(std::move(on_ready)), capacity_(std::max<std::size_t>(1, cache_capacity)) {
  worker_ = std::thread([this] { run(); });
}

GrammarCompiler::~GrammarCompiler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

CompileFuture GrammarCompiler::compile(const StructuredOutputsParams& params) {
  std::string key = params.cache_key();
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  Job job{params, {}};
  CompileFuture future = job.promise.get_future().share();
  jobs_.push_back(std::move(job));
  lru_.emplace_front(key, future);
  index_.emplace(std::move(key), lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  wake_.notify_one();
  return future;
}

std::size_t GrammarCompiler::cached_entries() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

std::uint64_t GrammarCompiler::compilations() const {
  std::lock_guard lock(mutex_);
  return compilations_;
}

CompiledConstraint GrammarCompiler::compile_now(const StructuredOutputsParams& params) {
  const auto started = std::chrono::steady_clock::now();
  CompiledConstraint out;
  try {
    if (!impl_) {
      const auto t0 = std::chrono::steady_clock::now();
      impl_ = std::make_unique<Impl>(vocabulary_());
      spdlog::info("structured output: grammar vocabulary ready ({} tokens) in {:.2f} s", impl_->info.GetVocabSize(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    xgrammar::Grammar grammar = build_grammar(params);
    out.grammar = std::make_shared<const xgrammar::CompiledGrammar>(impl_->compiler.CompileGrammar(grammar));
    using Kind = StructuredOutputsParams::Kind;
    if (params.kind == Kind::kJson || params.kind == Kind::kJsonObject) out.token_filter = impl_->json_filter;
  } catch (const std::exception& e) {
    out.grammar.reset();
    out.error = e.what();
  }
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

void GrammarCompiler::run() {
  while (true) {
    std::optional<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) {
        // Whoever still waits gets an answer instead of a broken promise.
        for (Job& j : jobs_) j.promise.set_value(CompiledConstraint{nullptr, "the server is shutting down", 0.0, nullptr});
        jobs_.clear();
        return;
      }
      job.emplace(std::move(jobs_.front()));
      jobs_.pop_front();
    }
    CompiledConstraint result = compile_now(job->params);
    if (!result.grammar) {
      // A failure is not worth keeping: the same constraint again gets a fresh attempt (and message).
      std::lock_guard lock(mutex_);
      if (auto it = index_.find(job->params.cache_key()); it != index_.end()) {
        lru_.erase(it->second);
        index_.erase(it);
      }
    }
    {
      std::lock_guard lock(mutex_);
      ++compilations_;
    }
    job->promise.set_value(std::move(result));
    if (on_ready_) on_ready_();
  }
}

}  // namespace fp4serve::engine
