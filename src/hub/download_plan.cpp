#include "hub/download_plan.h"

#include <nlohmann/json.hpp>

#include "hub/hub_error.h"

namespace fp4serve::hub {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

RepoRevision parse_revision_info(std::string_view json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    throw HubError(HubErrorKind::kHttp, std::string("the hub's revision info is not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string())
    throw HubError(HubErrorKind::kHttp, "the hub's revision info has no \"sha\" (commit hash)");
  RepoRevision r;
  r.commit = j["sha"].get<std::string>();
  if (j.contains("siblings") && j["siblings"].is_array()) {
    for (const auto& s : j["siblings"]) {
      if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string())
        r.files.push_back(s["rfilename"].get<std::string>());
    }
  }
  return r;
}

bool serving_needs(std::string_view f) {
  if (f.empty() || f.find('/') != std::string_view::npos) return false;
  if (ends_with(f, ".safetensors") || ends_with(f, ".json") || ends_with(f, ".jinja")) return true;
  return f == "merges.txt" || f == "tokenizer.model" || f == "vocab.txt";
}

std::vector<std::string> serving_files(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& f : files)
    if (serving_needs(f)) out.push_back(f);
  return out;
}

uint64_t DownloadPlan::total_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files) n += f.meta.size;
  return n;
}

uint64_t DownloadPlan::remaining_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files)
    if (!f.cached) n += f.meta.size - std::min(f.partial_bytes, f.meta.size);
  return n;
}

size_t DownloadPlan::files_to_fetch() const {
  size_t n = 0;
  for (const auto& f : files) n += f.cached ? 0 : 1;
  return n;
}

}  // namespace fp4serve::hub
