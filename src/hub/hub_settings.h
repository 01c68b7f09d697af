// Where the hub client talks to and writes, from the environment exactly as huggingface_hub reads it
// (constants.py, utils/_auth.py):
//   endpoint  $HF_ENDPOINT (trailing '/' dropped), else https://huggingface.co
//   token     $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token
//             (HF_HOME: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface);
//             surrounding whitespace stripped, empty = none
//   offline   $HF_HUB_OFFLINE (or $TRANSFORMERS_OFFLINE) is one of 1, ON, YES, TRUE (any case)
//   cache     --download-dir (vLLM passes it to huggingface_hub as cache_dir), else HF_HUB_CACHE's
//             rules (checkpoint/model_locator.h)
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "checkpoint/model_locator.h"

namespace fp4serve::hub {

struct HubSettings {
  std::string endpoint = "https://huggingface.co";
  std::optional<std::string> token;
  std::string token_source;  // "$HF_TOKEN", "file <path>", or "none (looked at $HF_TOKEN, <path>)"
  std::string token_path;    // the token file huggingface_hub reads
  bool offline = false;
  std::filesystem::path cache_root;
  std::string cache_source;  // "--download-dir", "$HF_HUB_CACHE", ...
  int max_workers = 8;       // files downloaded at once (snapshot_download's max_workers)
};

HubSettings hub_settings(const std::string& download_dir = "", const EnvLookup& env = process_env());

// huggingface_hub's _is_true.
bool env_is_true(const std::optional<std::string>& value);

}  // namespace fp4serve::hub
