// Compiles structured-output constraints against the model's vocabulary, off the engine thread, and
// keeps the results in an LRU keyed by the constraint (StructuredOutputsParams::cache_key), so a schema
// compiles once and a new schema never stalls the requests already running (vLLM compiles in a thread
// pool and parks the request in WAITING_FOR_FSM meanwhile; the engine does the same, engine.cpp).
//
// xgrammar's TokenizerInfo is built on the worker from the tokenizer's raw token bytes (every id,
// added tokens included; ids past the tokenizer up to the logits row are never allowed) with the
// model's EOS ids as the grammar's stop tokens, the way vLLM's xgrammar backend builds it
// (TokenizerInfo.from_huggingface with the model's vocab size).
//
// Threading: compile() and cached_entries() may be called from any thread; results are shared
// futures, ready once the worker has compiled (or failed to compile) the constraint; on_ready is
// called on the worker after each result so the engine can wake up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/structured/structured_output_params.h"

namespace xgrammar {
class CompiledGrammar;
}

namespace fp4serve::engine {

// The vocabulary as the grammar engine sees it.
struct GrammarVocabulary {
  std::vector<std::string> token_bytes;  // per id, the bytes it decodes to
  int logits_size = 0;                   // the logits row (>= token_bytes.size())
  std::vector<std::int32_t> stop_token_ids;
};

struct CompiledConstraint {
  std::shared_ptr<const xgrammar::CompiledGrammar> grammar;  // null on failure
  std::string error;                                         // why it failed
  double compile_seconds = 0.0;
  // JSON constraints: the tokens that may appear in JSON at all (a bitmask over the logits row);
  // null for the other kinds. xgrammar 0.2.9's strings with minLength/maxLength admit raw control
  // characters (its character class excludes only '"', '\\', CR and LF), which no JSON parser
  // accepts; a token holding a byte below 0x20 other than CR and LF is therefore never allowed in
  // JSON (tabs go too: a tab is whitespace between values but invalid inside a string, and spaces
  // and newlines serve as whitespace).
  std::shared_ptr<const std::vector<std::int32_t>> token_filter;
};
using CompileFuture = std::shared_future<CompiledConstraint>;

class GrammarCompiler {
 public:
  // `vocabulary` is called once, on the worker, before the first compile.
  GrammarCompiler(std::function<GrammarVocabulary()> vocabulary, std::size_t cache_capacity,
                  std::function<void()> on_ready = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // The compiled constraint: from the cache when this key was compiled (or is compiling), else
  // queued for the worker.
  CompileFuture compile(const StructuredOutputsParams& params);

  std::size_t cached_entries() const;
  std::uint64_t compilations() const;  // constraints the worker compiled (cache misses)

 private:
  struct Job {
    StructuredOutputsParams params;
    std::promise<CompiledConstraint> promise;
  };
  void run();
  CompiledConstraint compile_now(const StructuredOutputsParams& params);

  struct Impl;  // xgrammar's compiler, made on the worker
  std::unique_ptr<Impl> impl_;
  std::function<GrammarVocabulary()> vocabulary_;
  std::function<void()> on_ready_;
  std::size_t capacity_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::uint64_t compilations_ = 0;
  // LRU: most recent first; the map points into the list.
  std::list<std::pair<std::string, CompileFuture>> lru_;
  std::unordered_map<std::string, std::list<std::pair<std::string, CompileFuture>>::iterator> index_;
  std::thread worker_;
};

}  // namespace fp4serve::engine
