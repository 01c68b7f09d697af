#include "model/vision_loader.h"

namespace fp4serve::model {
namespace {

std::unique_ptr<VisionTower> load(const std::filesystem::path& dir, const ShardedCheckpoint& files,
                                  std::shared_ptr<const void> keep_alive, kernels::Backend& backend,
                                  const VisionLoadOptions& options) {
  if (options.skip) return nullptr;
  auto config = VisionConfig::load(dir);
  if (!config || !has_vision_tensors(files)) return nullptr;
  VisionWeights w = bind_vision_weights(files, *config, backend);
  return std::make_unique<VisionTower>(*config, std::move(w), backend, std::move(keep_alive));
}

}  // namespace

std::unique_ptr<VisionTower> load_vision_tower(std::shared_ptr<const LoadedCheckpoint> checkpoint,
                                               kernels::Backend& backend, const VisionLoadOptions& options) {
  const auto& files = checkpoint->files();
  const auto dir = checkpoint->directory();
  return load(dir, files, std::move(checkpoint), backend, options);
}

std::unique_ptr<VisionTower> load_vision_tower(const std::filesystem::path& model_dir, kernels::Backend& backend,
                                               const VisionLoadOptions& options) {
  if (options.skip) return nullptr;
  auto files = std::make_shared<ShardedCheckpoint>(ShardedCheckpoint::open(model_dir));
  const ShardedCheckpoint& ref = *files;
  return load(model_dir, ref, std::move(files), backend, options);
}

}  // namespace fp4serve::model
