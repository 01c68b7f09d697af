#include "tools/model_source.h"

#include <filesystem>

#include <CLI/CLI.hpp>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/model_locator.h"
#include "hub/hub_error.h"
#include "hub/hub_settings.h"
#include "hub/snapshot_download.h"

namespace fp4serve::tools {

void add_model_source_flags(CLI::App& cmd, ModelSourceFlags& f) {
  cmd.add_option("--revision", f.revision, "branch, tag or commit of a Hugging Face model id (default main)");
  cmd.add_option("--download-dir", f.download_dir,
                 "Hugging Face cache directory to download into and read from (default: HF_HUB_CACHE, HF_HOME/hub "
                 "or ~/.cache/huggingface/hub)");
}

std::string resolve_model_dir(const std::string& model, const ModelSourceFlags& f, bool show_progress) {
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) return model;
  if (!is_plausible_repo_id(model)) {
    // Not a repo id: the locator's message says what was looked at.
    return locate_model(model, f.revision).string();
  }
  const hub::HubSettings settings = hub::hub_settings(f.download_dir);
  try {
    return hub::snapshot_download(model, f.revision.empty() ? "main" : f.revision, settings, show_progress).dir.string();
  } catch (const hub::HubError& e) {
    throw CheckpointError(model, std::string(e.what()) + " [Hugging Face cache: " +
                                     (settings.cache_root / hf_repo_folder_name(model)).string() + "]");
  }
}

}  // namespace fp4serve::tools
