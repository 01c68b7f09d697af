#include "hub/hub_settings.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace fp4serve::hub {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> clean_token(std::optional<std::string> t) {
  if (!t) return std::nullopt;
  auto& s = *t;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  s.erase(0, i);
  if (s.empty()) return std::nullopt;
  return t;
}

std::string expand_user(const std::string& s, const EnvLookup& env) {
  if (s.empty() || s[0] != '~' || (s.size() > 1 && s[1] != '/')) return s;
  auto home = env("HOME");
  return home ? *home + s.substr(1) : s;
}

std::optional<std::string> non_empty(const EnvLookup& env, const char* name) {
  auto v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

bool env_is_true(const std::optional<std::string>& value) {
  if (!value) return false;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

HubSettings hub_settings(const std::string& download_dir, const EnvLookup& env) {
  HubSettings s;
  if (auto e = non_empty(env, "HF_ENDPOINT")) {
    s.endpoint = *e;
    while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  }
  s.offline = env_is_true(non_empty(env, "HF_HUB_OFFLINE")) ||
              (!non_empty(env, "HF_HUB_OFFLINE") && env_is_true(non_empty(env, "TRANSFORMERS_OFFLINE")));

  fs::path hf_home;
  if (auto v = non_empty(env, "HF_HOME")) hf_home = expand_user(*v, env);
  else if (auto x = non_empty(env, "XDG_CACHE_HOME")) hf_home = fs::path(expand_user(*x, env)) / "huggingface";
  else hf_home = fs::path(expand_user("~/.cache", env)) / "huggingface";
  s.token_path = (non_empty(env, "HF_TOKEN_PATH") ? fs::path(expand_user(*non_empty(env, "HF_TOKEN_PATH"), env))
                                                  : hf_home / "token")
                     .string();
  if (auto t = clean_token(env("HF_TOKEN"))) {
    s.token = t;
    s.token_source = "$HF_TOKEN";
  } else if (auto t2 = clean_token(env("HUGGING_FACE_HUB_TOKEN"))) {
    s.token = t2;
    s.token_source = "$HUGGING_FACE_HUB_TOKEN";
  } else {
    std::ifstream in(s.token_path);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    if (auto t3 = clean_token(in ? std::optional<std::string>(ss.str()) : std::nullopt)) {
      s.token = t3;
      s.token_source = "file " + s.token_path;
    } else {
      s.token_source = "none (looked at $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN and " + s.token_path + ")";
    }
  }

  if (!download_dir.empty()) {
    s.cache_root = expand_user(download_dir, env);
    s.cache_source = "--download-dir";
  } else {
    const HubCacheRoot root = hf_hub_cache_root(env);
    s.cache_root = root.path;
    s.cache_source = root.source;
  }
  return s;
}

}  // namespace fp4serve::hub
