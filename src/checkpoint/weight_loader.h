// Opens a model for serving: locates it (directory or HF cache id), parses its configs, opens every
// safetensors shard, and checks the tensors on disk against the TensorPlan of the text model —
// every expected tensor present with an accepted dtype and the expected shape, nothing unexplained
// left over. All problems are collected and reported together, by tensor name, so that one run
// tells the whole story of a broken or mismatched checkpoint.
//
// Weights stay in the mmap'd files (zero-copy); the model layer reads them through tensor().
// Loading touches every page once (optionally) with a progress bar, so that the first request does
// not pay for disk reads and a truncated file on a lazy filesystem shows up at load, not mid-request.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/generation_config.h"
#include "checkpoint/model_config.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/tensor_plan.h"

namespace fp4serve {

struct LoadOptions {
  std::string revision = "main";  // for HF cache ids
  bool touch_pages = false;       // read every page of the planned tensors once, with progress
  bool show_progress = true;      // progress bar / log lines while touching pages
};

// A tensor of the checkpoint with its dtype, shape and bytes (zero-copy into the mmap).
struct WeightView {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> bytes;

  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

class LoadedCheckpoint {
 public:
  // Throws CheckpointError naming the model directory (or file) and every problem found.
  static LoadedCheckpoint open(std::string_view model, const LoadOptions& options = {});

  const std::filesystem::path& directory() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation_config() const { return generation_; }
  const QuantConfig& quant_config() const { return quant_; }
  const TensorPlan& plan() const { return plan_; }
  ExpertStorage expert_storage() const { return experts_; }
  const ShardedCheckpoint& files() const { return *files_; }

  bool has(std::string_view name) const { return files_->contains(name); }
  // Throws CheckpointError naming the tensor when absent.
  WeightView tensor(std::string_view name) const;

  // Tensors present in the files that the text model does not use (MTP head, vision tower).
  size_t known_unused_tensors() const { return known_unused_; }

  // The MTP block (make_mtp_plan, docs/model-arch.md §2.5), checked apart from the text model: a
  // checkpoint without it serves normally, one whose block does not match its plan serves too and
  // names the problems when speculative decoding is asked for. Each MTP linear's format is the one
  // its tensors have on disk where they are unquantized: every release keeps mtp.* in BF16, though
  // not every quantization config says so (ModelOpt's NVFP4 config omits mtp.fc; vLLM forces it
  // unquantized the same way).
  bool has_mtp() const { return has_mtp_; }
  const TensorPlan& mtp_plan() const { return mtp_plan_; }
  ExpertStorage mtp_expert_storage() const { return mtp_experts_; }
  size_t mtp_tensors_on_disk() const { return mtp_tensors_; }
  const std::vector<std::string>& mtp_problems() const { return mtp_problems_; }
  // Why MTP speculative decoding cannot run on this checkpoint; empty when it can.
  std::string mtp_unavailable_reason() const;
  uint64_t file_bytes() const;
  // Reads every page of the planned tensors once (what LoadOptions::touch_pages does at open), for a
  // caller that opened without it and then learned it needs the bytes (a packed-weight cache miss).
  void touch_weight_pages(bool show_progress) const;

 private:
  LoadedCheckpoint() = default;
  // Finds and checks the MTP block (after the text model's plan passed).
  void open_mtp(bool kv_scales);

  std::filesystem::path dir_;
  ModelConfig config_;
  GenerationConfig generation_;
  QuantConfig quant_;
  TensorPlan plan_;
  ExpertStorage experts_ = ExpertStorage::kPerExpert;
  std::shared_ptr<ShardedCheckpoint> files_;
  size_t known_unused_ = 0;
  bool has_mtp_ = false;
  TensorPlan mtp_plan_;
  ExpertStorage mtp_experts_ = ExpertStorage::kFused;
  size_t mtp_tensors_ = 0;
  std::vector<std::string> mtp_problems_;
};

// The checks behind open(), usable on their own (tests, inspect on a partial model): returns one
// line per problem ("missing: X (expected BF16 [2048])", "wrong dtype: ...", "wrong shape: ...",
// "unexpected: ...", and value checks such as unequal NVFP4 gate/up global scales). Empty = OK.
std::vector<std::string> check_against_plan(const ShardedCheckpoint& files, const TensorPlan& plan,
                                            size_t* known_unused = nullptr);

// The MTP block's checks: the planned tensors of mtp_plan (missing, dtype, shape, scale values) and
// any other "mtp." tensor in the files (unexpected). Empty = usable.
std::vector<std::string> check_mtp_against_plan(const ShardedCheckpoint& files, const TensorPlan& mtp_plan);

// Whether the routed experts of this checkpoint are fused 3-D tensors or per-expert 2-D ones.
ExpertStorage detect_expert_storage(const ShardedCheckpoint& files, const ModelConfig& config);

}  // namespace fp4serve
