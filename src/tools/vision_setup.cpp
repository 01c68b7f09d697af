#include "tools/vision_setup.h"

#include <fmt/format.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/vision_loader.h"

namespace fp4serve::tools {
namespace {

// The tower and the backend it runs on, kept alive together behind the VisionEncoder pointer.
struct TowerHolder {
  std::shared_ptr<kernels::Backend> backend;
  std::unique_ptr<model::VisionTower> tower;
};

}  // namespace

std::shared_ptr<const model::VisionEncoder> load_serving_vision(std::shared_ptr<const LoadedCheckpoint> checkpoint,
                                                                std::shared_ptr<kernels::Backend> model_backend,
                                                                const VisionChoice& choice,
                                                                std::vector<std::string>& decisions) {
  if (!checkpoint->config().has_vision_config) {
    decisions.push_back("Vision tower: the checkpoint has none; requests with images are refused");
    return nullptr;
  }
  if (!choice.load) {
    decisions.push_back(fmt::format("Vision tower: not loaded ({}); requests with images are refused",
                                    choice.why_not_loaded));
    return nullptr;
  }
  auto holder = std::make_shared<TowerHolder>();
  const bool model_on_cpu = model_backend->device() == kernels::Device::kCpu;
  if (model_on_cpu || choice.on_cpu) {
    holder->backend = std::make_shared<kernels::cpu::CpuBackend>(kernels::cpu::active_isa());
  } else {
    holder->backend = std::move(model_backend);
  }
  holder->tower = model::load_vision_tower(checkpoint, *holder->backend);
  if (!holder->tower) {
    decisions.push_back("Vision tower: config.json has a vision_config but the checkpoint has no model.visual.* "
                        "tensors; requests with images are refused");
    return nullptr;
  }
  const auto& vc = holder->tower->config();
  decisions.push_back(fmt::format(
      "Vision tower: {} blocks, {:.1f} MiB of weights, on {} (--vision-device {}){}; images are encoded on the "
      "engine thread when a prefill reaches them",
      vc.depth, static_cast<double>(holder->tower->weight_bytes()) / (1 << 20),
      holder->backend->device() == kernels::Device::kCpu ? "the CPU" : "the language model's device",
      choice.on_cpu ? "cpu" : "same",
      model_on_cpu ? "" : (choice.on_cpu ? ", features copied to the language model's device" : "")));
  const model::VisionEncoder* encoder = holder->tower.get();
  return std::shared_ptr<const model::VisionEncoder>(std::move(holder), encoder);
}

}  // namespace fp4serve::tools
