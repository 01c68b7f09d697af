#include "hub/hub_cache_layout.h"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <system_error>

#include "checkpoint/model_locator.h"
#include "hub/hub_error.h"

namespace fp4serve::hub {
namespace {

namespace fs = std::filesystem;

bool lower_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  return true;
}

}  // namespace

bool is_commit_hash(std::string_view s) { return lower_hex(s, 40); }
bool is_sha256_hex(std::string_view s) { return lower_hex(s, 64); }

std::string normalize_etag(std::string_view etag) {
  // Python's str.lstrip("W/") strips any run of 'W' and '/' characters, then strip('"').
  size_t b = 0;
  while (b < etag.size() && (etag[b] == 'W' || etag[b] == '/')) ++b;
  etag.remove_prefix(b);
  while (!etag.empty() && etag.front() == '"') etag.remove_prefix(1);
  while (!etag.empty() && etag.back() == '"') etag.remove_suffix(1);
  return std::string(etag);
}

bool is_safe_repo_filename(std::string_view f) {
  if (f.empty() || f.front() == '/' || f.find('\\') != std::string_view::npos || f.find('\0') != std::string_view::npos)
    return false;
  size_t start = 0;
  while (true) {
    const size_t slash = f.find('/', start);
    const std::string_view part = f.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

HubCacheLayout::HubCacheLayout(fs::path root, std::string repo_id) : root_(std::move(root)), repo_id_(std::move(repo_id)) {}

fs::path HubCacheLayout::repo_dir() const { return root_ / hf_repo_folder_name(repo_id_); }
fs::path HubCacheLayout::blobs_dir() const { return repo_dir() / "blobs"; }
fs::path HubCacheLayout::blob(std::string_view etag) const { return blobs_dir() / std::string(etag); }
fs::path HubCacheLayout::incomplete(std::string_view etag) const {
  return blobs_dir() / (std::string(etag) + ".incomplete");
}
fs::path HubCacheLayout::snapshot_dir(std::string_view commit) const {
  return repo_dir() / "snapshots" / std::string(commit);
}
fs::path HubCacheLayout::snapshot_file(std::string_view commit, std::string_view filename) const {
  return snapshot_dir(commit) / std::string(filename);
}
fs::path HubCacheLayout::ref_file(std::string_view revision) const { return repo_dir() / "refs" / std::string(revision); }

std::optional<std::string> HubCacheLayout::resolve_revision(std::string_view revision) const {
  if (is_commit_hash(revision)) return std::string(revision);
  std::ifstream in(ref_file(revision));
  std::string commit;
  if (!in || !std::getline(in, commit)) return std::nullopt;
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

void HubCacheLayout::write_ref(std::string_view revision, std::string_view commit) const {
  const fs::path ref = ref_file(revision);
  fs::create_directories(ref.parent_path());
  const fs::path tmp = ref.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out) throw HubError(HubErrorKind::kHttp, "cannot write " + tmp.string());
  }
  fs::rename(tmp, ref);
}

std::string HubCacheLayout::symlink_target(std::string_view filename, std::string_view etag) {
  std::string up = "../../";
  for (char c : filename)
    if (c == '/') up += "../";
  return up + "blobs/" + std::string(etag);
}

void HubCacheLayout::link_snapshot_file(std::string_view commit, std::string_view filename,
                                        std::string_view etag) const {
  const fs::path dst = snapshot_file(commit, filename);
  fs::create_directories(dst.parent_path());
  std::error_code ec;
  fs::remove(dst, ec);
  fs::create_symlink(symlink_target(filename, etag), dst);
}

}  // namespace fp4serve::hub
