// Loading the checkpoint's vision tower: what the engine calls at start-up (and tools/tests with a
// model directory). Returns nullptr when there is nothing to load: no vision_config, no model.visual.*
// tensors, or the caller asked to skip it (--limit-mm-per-prompt '{"image": 0}'); throws
// CheckpointError naming the tensor when the tower is there but cannot be loaded.
#pragma once

#include <filesystem>
#include <memory>

#include "checkpoint/weight_loader.h"
#include "kernels/backend.h"
#include "model/vision_tower.h"

namespace fp4serve::model {

struct VisionLoadOptions {
  bool skip = false;  // do not load the tower even if the checkpoint has one
};

// From an opened checkpoint (its config.json is re-read for vision_config, which the text
// ModelConfig does not keep). The tower keeps `checkpoint` alive.
std::unique_ptr<VisionTower> load_vision_tower(std::shared_ptr<const LoadedCheckpoint> checkpoint,
                                               kernels::Backend& backend, const VisionLoadOptions& options = {});

// From a model directory holding config.json and safetensors (the tower's tensors may be all there is:
// the tiny test checkpoints); opens the files itself.
std::unique_ptr<VisionTower> load_vision_tower(const std::filesystem::path& model_dir, kernels::Backend& backend,
                                               const VisionLoadOptions& options = {});

}  // namespace fp4serve::model
