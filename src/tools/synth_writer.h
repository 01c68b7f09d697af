// `fp4serve synth`: writes a random-weight checkpoint with the real tensor names, shapes, dtypes,
// config files and quantization files of the matching release (synth_formats.h), streaming every
// tensor through SafetensorsWriter in chunks computed in parallel, never holding a large tensor in
// memory. The bytes depend only on (dims, format, seed): not on the thread count or chunking.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/tensor_plan.h"
#include "tools/synth_formats.h"
#include "tools/synth_preset.h"

namespace fp4serve::synth {

struct SynthOptions {
  SynthDims dims;  // the preset's, with num_hidden_layers set from --layers
  SynthFormat format = SynthFormat::kNVFP4;
  uint64_t seed = 0;
  std::filesystem::path out_dir;
  uint64_t max_shard_bytes = SafetensorsWriter::kDefaultMaxShardBytes;
  ByteProgress::Mode progress = ByteProgress::Mode::kAuto;
  // Write the MTP block (mtp.*, make_mtp_plan) as every release does: BF16, experts fused (the
  // NVFP4 release's 19 mtp.* tensors). false leaves it out, as some conversions do.
  bool mtp = true;
  // Write the vision tower (model.visual.*, synth_vision.h) at the dims' vision shapes, as every
  // release has it. false leaves it out (a text-only conversion; quicker to write).
  bool vision = true;
};

struct SynthResult {
  std::vector<std::filesystem::path> files;  // config files, shards, index
  size_t tensor_count = 0;
  uint64_t tensor_bytes = 0;  // sum of tensor data
  uint64_t file_bytes = 0;    // sum of the sizes of all files written
  double seconds = 0.0;
  // Modules where the QuantConfig parsed from the written files disagrees with the resolver the
  // tensors were written by ("path: wrote X, config says Y"); empty when they agree.
  std::vector<std::string> config_disagreements;
};

// The config.json written for these options (with quantization_config), as text; and the plan
// parsed back from it — what synthesize() writes. Exposed for tests.
struct SynthPlan {
  std::string config_text;
  std::vector<std::pair<std::string, std::string>> extra_files;  // generation_config.json, quant files
  TensorPlan plan;
  TensorPlan mtp_plan;  // empty without the MTP block
  TensorPlan vision_plan;  // empty without the vision tower
};
SynthPlan plan_synth(const SynthOptions& options);

SynthResult synthesize(const SynthOptions& options);

// Row r of the logical weight the module at `module_path` (e.g. "...experts.3.gate_proj") was made
// from, as floats — what a quantized tensor of it dequantizes close to. For tests.
std::vector<float> synth_weight_rows(uint64_t seed, const std::string& module_path, int64_t cols, int64_t r0,
                                     int64_t r1);

}  // namespace fp4serve::synth
