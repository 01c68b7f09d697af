// `fp4serve generate --model DIR --prompt TEXT -n N`: one prompt through the model, offline. Prints
// the generated text as it is produced and a line with prefill and decode tokens per second (decode
// efficiency = "active bytes per token" of `inspect` x decode tok/s / memory bandwidth).
//
// Tiny test models have no tokenizer and small vocabularies: --prompt-ids takes token ids instead,
// and without a tokenizer the output is printed as ids.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "model/qwen3_5_moe.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "server/metrics/stats_log_line.h"
#include "tools/commands.h"
#include "tools/cuda_graph_flags.h"
#include "tools/device_choice.h"
#include "tools/engine_setup.h"
#include "engine/engine.h"

namespace fp4serve::tools {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  std::string batch;  // file, one prompt per line ("ids: 1,2,3" lines give token ids)
  int max_tokens = 64;
  double temperature = 0.0;
  bool ignore_eos = false;
  CudaGraphFlags graphs;  // --enforce-eager, -O, --compilation-config, ... (the --batch engine's)
  EngineFlags engine;  // --tokenizer, --seed, --threads, --kv-cache-dtype and the engine's flags
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

// --batch: every line a request, all submitted at once to the engine; prints each completion and
// the offline throughput.
void run_engine_prompts(const GenerateOptions& o, const std::vector<std::string>& lines);

void run_batch(const GenerateOptions& o) {
  std::ifstream in(o.batch);
  if (!in) throw std::runtime_error("--batch: cannot read " + o.batch);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  if (lines.empty()) throw std::runtime_error("--batch: " + o.batch + " has no prompts");
  run_engine_prompts(o, lines);
}

// Every line a request ("ids: 1,2,3" or text), all submitted at once to the engine.
void run_engine_prompts(const GenerateOptions& o, const std::vector<std::string>& lines) {
  const engine::CudaGraphSettings cuda_graphs = resolve_cuda_graph_flags(o.graphs);  // bad flags: before the load
  ServingModel sm = load_serving_model(o.model, o.engine, nullptr, VisionChoice{false, false, "generate takes no images"});
  for (const std::string& d : sm.decisions) std::fprintf(stderr, "%s\n", d.c_str());
  sm.config.cuda_graphs = cuda_graphs;
  engine::Engine eng(sm.model, sm.tokenizer, sm.config);
  for (const std::string& l : eng.info().cache.log_lines) std::fprintf(stderr, "%s\n", l.c_str());
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::vector<std::shared_ptr<engine::OutputChannel>> channels;
  size_t prompt_tokens = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    engine::EngineRequest r;
    r.id = "batch-" + std::to_string(i);
    r.prompt_token_ids = lines[i].rfind("ids:", 0) == 0 ? parse_ids(lines[i].substr(4)) : sm.tokenizer->encode(lines[i]);
    prompt_tokens += r.prompt_token_ids.size();
    r.params.temperature = o.temperature;
    r.params.max_tokens = o.max_tokens;
    r.params.ignore_eos = o.ignore_eos;
    if (o.temperature > 0) r.params.seed = static_cast<int64_t>(o.engine.seed + i);
    engine::SamplingLimits lim;
    lim.vocab_size = sm.model->vocab_size();
    if (auto err = engine::prepare_sampling_params(r.params, lim)) throw std::runtime_error(err->message);
    channels.push_back(eng.submit(std::move(r)));
  }
  size_t generated = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::string text, reason;
    while (true) {
      auto out = channels[i]->pop(std::chrono::hours(24));
      if (!out) continue;
      for (const auto& d : out->deltas) {
        text += d.text;
        generated += d.token_ids.size();
        if (d.finished()) reason = d.finish_reason;
      }
      if (out->error) throw std::runtime_error("request " + out->request_id + ": " + *out->error);
      if (out->finished) break;
    }
    std::printf("[%zu] (%s) %s\n", i, reason.c_str(), text.c_str());
  }
  const double s = std::chrono::duration<double>(clock::now() - t0).count();
  const engine::EngineStats st = eng.stats();
  std::fprintf(stderr,
               "batch: %zu prompts, %zu prompt tokens, %zu generated tokens in %.3f s: output %.2f tok/s, total %.2f "
               "tok/s; %lld engine steps, %lld preemptions, prefix cache hits %lld of %lld tokens\n",
               lines.size(), prompt_tokens, generated, s, static_cast<double>(generated) / s,
               static_cast<double>(generated + prompt_tokens) / s, static_cast<long long>(st.num_steps),
               static_cast<long long>(st.scheduler.num_preemptions),
               static_cast<long long>(st.scheduler.prefix_cache_hits),
               static_cast<long long>(st.scheduler.prefix_cache_queries));
  // Decode speed apart from prefill: the tokens after each request's first over the time from its first
  // token to its last (vLLM's request_decode_time), summed over requests (batch-1 runs: --max-num-seqs 1).
  if (const double decode_s = st.request_decode_time.sum(); decode_s > 0 && generated > lines.size()) {
    std::fprintf(stderr, "decode: %zu tokens after the first of each request in %.3f s of decode time: %.2f tok/s\n",
                 generated - lines.size(), decode_s, static_cast<double>(generated - lines.size()) / decode_s);
  }
  if (st.scheduler.spec_decode.num_speculative_tokens > 0) {
    const std::string spec = server::metrics::spec_decode_log_line({}, st.scheduler.spec_decode, s);
    std::fprintf(stderr, "%s\n", spec.empty() ? "SpecDecoding metrics: no drafts verified" : spec.c_str());
  }
}

void run_generate(const GenerateOptions& o) {
  // stdout carries the completions only (scripts and tests read it): logs go to stderr, as
  // generate's own progress lines do.
  if (!spdlog::get("generate")) spdlog::set_default_logger(spdlog::stderr_color_mt("generate"));
  if (!o.batch.empty()) {
    if (!o.prompt.empty() || !o.prompt_ids.empty()) throw std::runtime_error("--batch replaces --prompt and --prompt-ids");
    run_batch(o);
    return;
  }
  if (o.prompt.empty() == o.prompt_ids.empty()) throw std::runtime_error("give exactly one of --prompt and --prompt-ids");
  // The single-prompt path is the bare forward pass, not the engine: it has no drafter to run.
  if (!o.engine.speculative_config.empty())
    throw std::runtime_error("--speculative-config runs in the engine: use --batch FILE (one line for one prompt)");
  if (o.engine.threads > 0) kernels::cpu::set_num_threads(o.engine.threads);
  // The device before the load: --device cuda without a GPU fails here (device_choice.h).
  DeviceChoice device = choose_device(o.engine.device, probe_cuda());
  if (device.kind == DeviceKind::kCuda) {
    // The bare forward pass keeps its state in host memory (Qwen35MoeModel::new_sequence): on the
    // GPU the prompt goes through the engine, as one line of --batch.
    std::fprintf(stderr, "%s: the prompt runs through the engine (as --batch)\n", device.log_line.c_str());
    run_engine_prompts(o, {o.prompt_ids.empty() ? o.prompt : "ids: " + o.prompt_ids});
    return;
  }
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(resolve_model_dir(o.model, o.engine.source), LoadOptions{"main", true, true}));
  const model::Qwen35MoeModel m(ck, make_backend(device, o.engine.device == "auto"));
  const auto tok =
      maybe_tokenizer(o.engine.tokenizer.empty() ? ck->directory() : std::filesystem::path(o.engine.tokenizer));
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
  if (o.engine.kv_cache_dtype == "fp8" || o.engine.kv_cache_dtype == "fp8_e4m3") kv = kernels::KvDtype::kFp8E4M3;
  else if (o.engine.kv_cache_dtype != "auto" && o.engine.kv_cache_dtype != "bfloat16")
    throw std::runtime_error("--kv-cache-dtype must be auto, bfloat16, fp8 or fp8_e4m3");
  std::fprintf(stderr, "model: %s, %lld layers, vocab %lld; %zu prompt tokens; %d threads, %s kernels; %s\n",
               ck->directory().c_str(), static_cast<long long>(m.config().num_hidden_layers),
               static_cast<long long>(m.vocab_size()), prompt.size(), kernels::cpu::num_threads(),
               std::string(kernels::cpu::isa_name(kernels::cpu::active_isa())).c_str(), device.log_line.c_str());

  const auto& eos = ck->generation_config().eos_token_ids.empty() ? m.config().eos_token_ids
                                                                   : ck->generation_config().eos_token_ids;
  auto state = m.new_sequence(static_cast<int64_t>(prompt.size()) + o.max_tokens, kv);
  std::mt19937_64 rng(o.engine.seed);
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  if (tok) detok = std::make_unique<tokenizer::IncrementalDetokenizer>(*tok, tokenizer::DetokenizerOptions{}, prompt);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto logits = m.forward({{&state, prompt, false, {}, {}}});
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
    logits = m.forward({{&state, std::span<const int32_t>(&next, 1), false, {}, {}}});
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
  cmd->add_option("--model,-m", o->model, "model directory or Hugging Face id (downloaded unless HF_HUB_OFFLINE=1)")->required();
  cmd->add_option("--prompt,-p", o->prompt, "prompt text (needs the model's tokenizer.json)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as comma-separated token ids");
  cmd->add_option("--batch", o->batch, "file with one prompt per line, run through the engine (continuous batching)");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  add_engine_flags(*cmd, o->engine);
  add_cuda_graph_flags(*cmd, o->graphs);
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace fp4serve::tools
