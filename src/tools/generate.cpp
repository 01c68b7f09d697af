// `fp4serve generate --model DIR --prompt TEXT -n N`: one prompt through the model, offline. Prints
// the generated text as it is produced and a line with prefill and decode tokens per second (decode
// efficiency = "active bytes per token" of `inspect` x decode tok/s / memory bandwidth).
//
// Tiny test models have no tokenizer and small vocabularies: --prompt-ids takes token ids instead,
// and without a tokenizer the output is printed as ids.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "model/qwen3_5_moe.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace fp4serve::tools {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  std::string tokenizer;  // defaults to the model directory
  int max_tokens = 64;
  double temperature = 0.0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  int threads = 0;
  std::string kv_cache_dtype = "auto";
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      ids.push_back(static_cast<int32_t>(std::stol(item)));
    } catch (const std::exception&) {
      throw std::runtime_error("--prompt-ids: '" + item + "' is not a token id");
    }
  }
  if (ids.empty()) throw std::runtime_error("--prompt-ids: no token ids given");
  return ids;
}

// Greedy at temperature 0, else sampling from softmax(logits / T) with a seeded generator. (The
// engine's sampler, with top-k/top-p/penalties, is issue 5.)
int32_t pick(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0.0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  const float mx = *std::max_element(logits, logits + vocab);
  std::vector<double> p(static_cast<size_t>(vocab));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  double r = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int64_t i = 0; i < vocab; ++i) {
    if ((r -= p[i]) <= 0.0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(vocab - 1);
}

std::unique_ptr<tokenizer::Tokenizer> maybe_tokenizer(const std::filesystem::path& where) {
  for (const char* f : {"tokenizer.json", "tokenizer.json.gz"}) {
    if (std::filesystem::exists(where / f) || (std::filesystem::is_regular_file(where) && where.filename() == f)) {
      return tokenizer::Tokenizer::load(where);
    }
  }
  if (std::filesystem::is_regular_file(where)) return tokenizer::Tokenizer::load(where);
  return nullptr;
}

void run_generate(const GenerateOptions& o) {
  if (o.prompt.empty() == o.prompt_ids.empty()) throw std::runtime_error("give exactly one of --prompt and --prompt-ids");
  if (o.threads > 0) kernels::cpu::set_num_threads(o.threads);
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(o.model, LoadOptions{"main", true, true}));
  const model::Qwen35MoeModel m(ck);
  const auto tok = maybe_tokenizer(o.tokenizer.empty() ? ck->directory() : std::filesystem::path(o.tokenizer));
  std::vector<int32_t> prompt;
  if (!o.prompt.empty()) {
    if (!tok) {
      throw std::runtime_error("no tokenizer.json in " + ck->directory().string() +
                               ": give --tokenizer PATH, or token ids with --prompt-ids");
    }
    prompt = tok->encode(o.prompt);
  } else {
    prompt = parse_ids(o.prompt_ids);
  }
  kernels::KvDtype kv = kernels::KvDtype::kBf16;
  if (o.kv_cache_dtype == "fp8" || o.kv_cache_dtype == "fp8_e4m3") kv = kernels::KvDtype::kFp8E4M3;
  else if (o.kv_cache_dtype != "auto" && o.kv_cache_dtype != "bfloat16")
    throw std::runtime_error("--kv-cache-dtype must be auto, bfloat16, fp8 or fp8_e4m3");
  std::fprintf(stderr, "model: %s, %lld layers, vocab %lld; %zu prompt tokens; %d threads, %s kernels\n",
               ck->directory().c_str(), static_cast<long long>(m.config().num_hidden_layers),
               static_cast<long long>(m.vocab_size()), prompt.size(), kernels::cpu::num_threads(),
               std::string(kernels::cpu::isa_name(kernels::cpu::active_isa())).c_str());

  const auto& eos = ck->generation_config().eos_token_ids.empty() ? m.config().eos_token_ids
                                                                   : ck->generation_config().eos_token_ids;
  auto state = m.new_sequence(static_cast<int64_t>(prompt.size()) + o.max_tokens, kv);
  std::mt19937_64 rng(o.seed);
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  if (tok) detok = std::make_unique<tokenizer::IncrementalDetokenizer>(*tok, tokenizer::DetokenizerOptions{}, prompt);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto logits = m.forward({{&state, prompt, false}});
  const auto t1 = clock::now();
  int generated = 0;
  std::string finish = "length";
  // The lm_head is padded past the tokenizer's ids (Qwen3.6: 248,320 rows for 248,077 ids); the
  // padding rows are not tokens and must never be picked.
  const int64_t valid_vocab =
      tok ? std::min<int64_t>(m.vocab_size(), static_cast<int64_t>(tok->vocab_size())) : m.vocab_size();
  for (int i = 0; i < o.max_tokens; ++i) {
    const int32_t next = pick(logits.data(), valid_vocab, o.temperature, rng);
    ++generated;
    if (detok) {
      std::fputs(detok->step(next).c_str(), stdout);
    } else {
      std::printf("%s%d", i ? " " : "", next);
    }
    std::fflush(stdout);
    if (!o.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) {
      finish = "stop";
      break;
    }
    if (i + 1 == o.max_tokens) break;
    logits = m.forward({{&state, std::span<const int32_t>(&next, 1), false}});
  }
  const auto t2 = clock::now();
  if (detok) std::fputs(detok->flush().c_str(), stdout);
  std::printf("\n");
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  // The first generated token comes from the prefill's logits; decode steps = generated - 1.
  const int decode_steps = std::max(0, generated - 1);
  std::fprintf(stderr,
               "prefill: %zu tokens in %.3f s (%.2f tok/s); decode: %d tokens in %.3f s (%.2f tok/s); finish: %s\n",
               prompt.size(), prefill_s, static_cast<double>(prompt.size()) / prefill_s, decode_steps, decode_s,
               decode_steps > 0 ? decode_steps / decode_s : 0.0, finish.c_str());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "run one prompt through the model offline and print tokens/s");
  cmd->add_option("--model,-m", o->model, "model directory or Hugging Face id in the local cache")->required();
  cmd->add_option("--prompt,-p", o->prompt, "prompt text (needs the model's tokenizer.json)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as comma-separated token ids");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json or its directory (default: the model directory)");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "sampling seed");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_option("--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto|bfloat16|fp8");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace fp4serve::tools
