// Shared fixtures for the engine tests that run a real (tiny) model: the tiny BF16 reference model
// and the installed Qwen tokenizer, loaded once per process, and helpers to run requests to the end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/weight_loader.h"
#include "engine/engine.h"
#include "model/qwen3_5_moe.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::engine::testing {

inline std::shared_ptr<const model::Qwen35MoeModel> tiny_model(const std::string& name = "tiny-bf16") {
  static std::map<std::string, std::shared_ptr<const model::Qwen35MoeModel>> cache;
  auto& m = cache[name];
  if (!m) {
    const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / name;
    auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
    m = std::make_shared<model::Qwen35MoeModel>(ck);
  }
  return m;
}

inline std::shared_ptr<const tokenizer::Tokenizer> qwen_tokenizer() {
  static std::shared_ptr<const tokenizer::Tokenizer> tok =
      tokenizer::Tokenizer::load(std::filesystem::path(FP4SERVE_SOURCE_DIR) / ".cache" / "tokenizers" / "qwen3.5");
  return tok;
}

inline EngineConfig small_engine_config() {
  EngineConfig c;
  c.max_model_len = 512;
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 256;
  c.block_size = 16;
  c.cache_memory_bytes = 96ull << 20;
  c.snapshot_interval = 64;
  c.eos_token_id = -1;  // the tiny model's vocabulary has no EOS: lengths are set by max_tokens
  return c;
}

struct Finished {
  std::vector<std::vector<std::int32_t>> tokens;  // per sequence index
  std::vector<std::string> text;
  std::vector<std::string> finish_reason;
  std::vector<StopReason> stop_reason;
  std::vector<std::vector<SampleLogprobs>> logprobs;
  std::vector<std::optional<PromptLogprobs>> prompt_logprobs;  // per sequence index
  int num_outputs = 0;
  int num_cached_tokens = 0;
  std::optional<std::string> error;
};

// Reads a channel to its final output (fails the test after 120 s).
inline Finished collect(OutputChannel& ch, int n = 1) {
  Finished f;
  f.tokens.resize(n);
  f.text.resize(n);
  f.finish_reason.resize(n);
  f.stop_reason.resize(n);
  f.logprobs.resize(n);
  f.prompt_logprobs.resize(n);
  while (true) {
    auto out = ch.pop(std::chrono::seconds(120));
    if (!out) {
      ADD_FAILURE() << "no output within 120 s";
      return f;
    }
    ++f.num_outputs;
    for (auto& d : out->deltas) {
      auto i = static_cast<size_t>(d.index);
      f.tokens[i].insert(f.tokens[i].end(), d.token_ids.begin(), d.token_ids.end());
      f.text[i] += d.text;
      for (auto& lp : d.logprobs) f.logprobs[i].push_back(lp);
      if (d.prompt_logprobs) {
        EXPECT_FALSE(f.prompt_logprobs[i]) << "prompt logprobs come once, with the first token";
        f.prompt_logprobs[i] = std::move(d.prompt_logprobs);
      }
      if (d.finished()) {
        f.finish_reason[i] = d.finish_reason;
        f.stop_reason[i] = d.stop_reason;
      }
    }
    if (out->finished) {
      f.num_cached_tokens = out->num_cached_tokens;
      f.error = out->error;
      return f;
    }
  }
}

inline EngineRequest greedy_request(std::string id, std::vector<std::int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.id = std::move(id);
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

inline std::vector<std::int32_t> random_prompt(std::mt19937& rng, int len) {
  std::uniform_int_distribution<int> id(1, 500);
  std::vector<std::int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = id(rng);
  return p;
}

}  // namespace fp4serve::engine::testing
