// Where `serve`, `generate`, `doctor` and `inspect` get MODEL from: a local directory as is; a
// Hugging Face repo id through the hub module (hub/snapshot_download.h) -- downloaded into the HF
// cache (or --download-dir) when missing, read from the cache alone with HF_HUB_OFFLINE=1 -- as
// `vllm serve` does. Anything else gets the locator's message of every place looked at.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace fp4serve::tools {

struct ModelSourceFlags {
  std::string revision = "main";  // --revision
  std::string download_dir;       // --download-dir
};

// --revision and --download-dir with vLLM's meanings.
void add_model_source_flags(CLI::App& cmd, ModelSourceFlags& flags);

// The local directory of MODEL. Throws CheckpointError naming MODEL and what was tried.
std::string resolve_model_dir(const std::string& model, const ModelSourceFlags& flags, bool show_progress = true);

}  // namespace fp4serve::tools
