// What `serve` and `generate --batch` share: the engine flags with vLLM's names, loading the model,
// tokenizer and generation config, and turning the flags into an EngineConfig with every choice
// logged (a design rule of fp4serve: "say what you chose").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/weight_loader.h"
#include "engine/engine.h"
#include "model/qwen3_5_moe.h"
#include "tokenizer/tokenizer.h"
#include "tools/model_source.h"
#include "tools/startup_phases.h"
#include "tools/vision_setup.h"

namespace CLI {
class App;
}

namespace fp4serve::tools {

struct EngineFlags {
  std::string tokenizer;         // --tokenizer (default: the model directory)
  int max_model_len = 0;         // --max-model-len (0 = the model's)
  int max_num_seqs = 0;          // --max-num-seqs (0 = what the cache budget holds, at most 256)
  int max_num_batched_tokens = 2048;
  std::string kv_cache_memory;   // --kv-cache-memory / --kv-cache-memory-bytes: bytes, or 4GiB / 512MB / 2G
  std::string device = "auto";   // --device auto|cpu|cuda (device_choice.h)
  std::string gpu_memory_utilization;  // --gpu-memory-utilization ("" = not given: 0.9 on a GPU; refused on the CPU)
  std::string kv_cache_dtype = "auto";
  int block_size = 16;
  bool enable_prefix_caching = true;
  int snapshot_interval = 512;   // --prefix-snapshot-interval (tokens; multiple of the block size)
  int num_gpu_blocks_override = 0;
  uint64_t seed = 0;
  int threads = 0;
  ModelSourceFlags source;       // --revision, --download-dir
  bool weight_cache = true;      // --no-weight-cache: pack at every start, write no cache file
  std::string speculative_config;  // --speculative-config (JSON, vLLM's; speculative_config.h)
  std::string kv_events_config;    // --kv-events-config (JSON, vLLM's; kv_events_flag.h)
  bool async_scheduling = true;    // --async-scheduling / --no-async-scheduling (async_scheduling_flag.h)
};

// Registers the flags above on a subcommand.
void add_engine_flags(CLI::App& cmd, EngineFlags& flags);

// "4GiB", "4G", "512MB", "123456" -> bytes. Throws std::runtime_error naming the flag.
uint64_t parse_byte_size(const std::string& text, const std::string& flag);

struct ServingModel {
  std::shared_ptr<const LoadedCheckpoint> checkpoint;
  std::shared_ptr<const model::Qwen35MoeModel> model;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::shared_ptr<const model::VisionEncoder> vision;  // null: no tower loaded (images refused)
  engine::EngineConfig config;                          // config.vision_encoder = vision
  std::string chat_template;           // tokenizer_config.json's, or chat_template.jinja beside it ("" if none)
  std::string tokenizer_dir;
  std::vector<std::string> decisions;  // one log line per choice made for the user
};

// Loads everything and resolves the flags (kv dtype auto -> the checkpoint's FP8 KV when it has
// one, as vLLM; cache memory default; threads). Throws with the file or flag named.
// `phases`, when given, gets the load's phases (locate or download, load, pack or map weights,
// tokenizer, vision tower). `vision`: whether and where to load the checkpoint's vision tower
// (vision_setup.h; serve's --limit-mm-per-prompt / --vision-device). `weights` false: no model (the
// front-end of an engine process reads configs and the tokenizer only; `model` stays null).
ServingModel load_serving_model(const std::string& model_path, const EngineFlags& flags,
                                StartupPhases* phases = nullptr, const VisionChoice& vision = {},
                                bool weights = true);

}  // namespace fp4serve::tools
