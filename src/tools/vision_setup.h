// Loading the checkpoint's vision tower for serving (serve's --limit-mm-per-prompt and
// --vision-device, parsed by serve_media_flags.h): none when the checkpoint has no tower or images
// are off ('{"image": 0}' skips loading it; image parts then get a 400), else the tower as the
// engine's VisionEncoder. Images are encoded on the engine thread when a prefill reaches them.
//
// --vision-device: `cpu` runs the tower on the CPU backend and hands its features (host fp32) to the
// language model, which copies them to its device when it scatters them into the embeddings
// (Qwen35MoeModel::scatter_embeddings) -- the seeds' "tower on the CPU, language model on the GPU".
// `same` (default) runs it on the language model's backend. On a CPU-only build both are the CPU;
// the tower gets its own CPU backend instance there (its weights stay out of the language model's
// weight cache; the thread pool is shared).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/weight_loader.h"
#include "kernels/backend.h"
#include "model/vision_encoder.h"

namespace fp4serve::tools {

struct VisionChoice {
  bool load = true;    // false: --limit-mm-per-prompt '{"image": 0}', or a command that takes no images
  bool on_cpu = false; // --vision-device cpu
  std::string why_not_loaded = "--limit-mm-per-prompt '{\"image\": 0}'";  // for the log line
};

// The tower (null when there is none to load), and one log line saying what was chosen and why.
// Throws CheckpointError naming the tensor when the checkpoint's tower cannot be loaded.
std::shared_ptr<const model::VisionEncoder> load_serving_vision(std::shared_ptr<const LoadedCheckpoint> checkpoint,
                                                                std::shared_ptr<kernels::Backend> model_backend,
                                                                const VisionChoice& choice,
                                                                std::vector<std::string>& decisions);

}  // namespace fp4serve::tools
