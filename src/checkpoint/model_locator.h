// Resolves the MODEL argument of `fp4serve serve|generate|inspect` to a local directory. An existing
// directory is used as is; otherwise the argument is a Hugging Face repo id ("org/name") looked up in
// the local Hugging Face cache exactly where huggingface_hub would put it. Nothing is downloaded here
// (downloading is hub/snapshot_download.h's, called by tools/model_source.h before this).
//
// Cache root, as huggingface_hub/constants.py computes HF_HUB_CACHE:
//   $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE (legacy), else $HF_HOME/hub,
//   else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub
// ("~" and $VARS expanded as Python's expanduser/expandvars do). Inside it (file_download.py,
// _snapshot_download.py): models--org--name/refs/<revision> holds a commit hash, and
// models--org--name/snapshots/<commit>/ is the model directory. A 40-hex revision is used directly
// as the commit.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fp4serve {

// Environment lookup, injectable so tests need not touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

// The cache root huggingface_hub would use, and which variable decided it (for messages).
struct HubCacheRoot {
  std::filesystem::path path;
  std::string source;  // e.g. "$HF_HOME/hub" or "default ~/.cache/huggingface/hub"
};
HubCacheRoot hf_hub_cache_root(const EnvLookup& env = process_env());

// "org/name" -> "models--org--name" (repo_folder_name in file_download.py).
std::string hf_repo_folder_name(std::string_view repo_id);

// "org/name" or "name": letters, digits, '-', '_', '.', at most one '/', no ".." or "--".
bool is_plausible_repo_id(std::string_view id);

// Returns the model directory. Throws CheckpointError (path = the argument) listing every place
// looked at when nothing is found.
std::filesystem::path locate_model(std::string_view model, std::string_view revision = "main",
                                   const EnvLookup& env = process_env());

}  // namespace fp4serve
