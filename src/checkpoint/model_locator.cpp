#include "checkpoint/model_locator.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_error.h"

namespace fp4serve {
namespace {

namespace fs = std::filesystem;

// Python's os.path.expandvars (posixpath): $NAME and ${NAME} with NAME of [A-Za-z0-9_]; unknown
// variables are left as written.
std::string expand_vars(const std::string& s, const EnvLookup& env) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '$') {
      out += s[i++];
      continue;
    }
    const bool braced = i + 1 < s.size() && s[i + 1] == '{';
    size_t start = i + (braced ? 2 : 1), end = start;
    while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
    if (end == start || (braced && (end >= s.size() || s[end] != '}'))) {
      out += s[i++];
      continue;
    }
    const size_t next = end + (braced ? 1 : 0);
    auto value = env(s.substr(start, end - start));
    out += value ? *value : s.substr(i, next - i);
    i = next;
  }
  return out;
}

// Python's os.path.expanduser for "~" and "~/..." (the "~user" form is left alone).
std::string expand_user(const std::string& s, const EnvLookup& env) {
  if (s.empty() || s[0] != '~' || (s.size() > 1 && s[1] != '/')) return s;
  auto home = env("HOME");
  return home ? *home + s.substr(1) : s;
}

std::string expand(const std::string& s, const EnvLookup& env) { return expand_vars(expand_user(s, env), env); }

// An unset variable and an empty one are treated alike (huggingface_hub would use "" as a path).
std::optional<std::string> non_empty(const EnvLookup& env, const char* name) {
  auto v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

bool is_plausible_repo_id(std::string_view id) {
  if (id.empty() || id.size() > 200) return false;
  size_t slashes = 0;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (c == '/') {
      if (i == 0 || i + 1 == id.size() || id[i - 1] == '/') return false;
      ++slashes;
    } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return slashes <= 1 && id.find("..") == std::string_view::npos && id.find("--") == std::string_view::npos;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

HubCacheRoot hf_hub_cache_root(const EnvLookup& env) {
  if (auto v = non_empty(env, "HF_HUB_CACHE")) return {expand(*v, env), "$HF_HUB_CACHE"};
  if (auto v = non_empty(env, "HUGGINGFACE_HUB_CACHE")) return {expand(*v, env), "$HUGGINGFACE_HUB_CACHE"};
  if (auto v = non_empty(env, "HF_HOME")) return {fs::path(expand(*v, env)) / "hub", "$HF_HOME/hub"};
  // HF_HOME's default is itself expanded after joining: $XDG_CACHE_HOME/huggingface.
  if (auto v = non_empty(env, "XDG_CACHE_HOME")) {
    return {fs::path(expand(*v, env)) / "huggingface" / "hub", "$XDG_CACHE_HOME/huggingface/hub"};
  }
  return {fs::path(expand("~/.cache", env)) / "huggingface" / "hub", "default ~/.cache/huggingface/hub"};
}

std::string hf_repo_folder_name(std::string_view repo_id) {
  std::string out = "models";
  size_t start = 0;
  while (true) {
    const size_t slash = repo_id.find('/', start);
    out += "--";
    out += repo_id.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

fs::path locate_model(std::string_view model, std::string_view revision, const EnvLookup& env) {
  const std::string arg(model);
  std::vector<std::string> looked;
  std::error_code ec;
  if (fs::is_directory(arg, ec)) return fs::path(arg);
  looked.push_back("local directory " + arg + ": " + (fs::exists(arg, ec) ? "not a directory" : "does not exist"));

  if (!is_plausible_repo_id(model)) {
    looked.push_back("not looked up in the Hugging Face cache: '" + arg +
                     "' is not a repo id of the form org/name");
  } else {
    const HubCacheRoot root = hf_hub_cache_root(env);
    const fs::path repo = root.path / hf_repo_folder_name(model);
    const std::string rev(revision.empty() ? "main" : revision);
    std::string commit;
    if (is_commit_hash(rev)) {
      commit = rev;
    } else {
      const fs::path ref = repo / "refs" / rev;
      std::ifstream in(ref);
      if (in && std::getline(in, commit)) {
        while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
      } else {
        looked.push_back("revision file " + ref.string() + " (cache root from " + root.source +
                         "): " + (fs::exists(repo, ec) ? "missing" : "repo not in cache"));
        commit = rev;  // try_to_load_from_cache falls back to the revision as a folder name
      }
    }
    if (!commit.empty() && commit.find("..") == std::string::npos) {
      const fs::path snapshot = repo / "snapshots" / commit;
      if (fs::is_directory(snapshot, ec)) return snapshot;
      looked.push_back("snapshot " + snapshot.string() + " (cache root from " + root.source + "): does not exist");
    }
  }

  std::string msg = "model not found (use a local directory or a Hugging Face repo id). Looked at:";
  for (const auto& l : looked) msg += "\n  - " + l;
  throw CheckpointError(arg, msg);
}

}  // namespace fp4serve
