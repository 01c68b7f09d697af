#include "checkpoint/sharded_checkpoint.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/strict_json.h"

namespace fp4serve {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CheckpointError(file.string(), "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw CheckpointError(file.string(), "read failed");
  return ss.str();
}

// A shard name must stay inside the model directory: a plain relative path without "..".
bool is_safe_relative(const fs::path& p) {
  if (p.empty() || p.is_absolute()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

ShardedCheckpoint ShardedCheckpoint::open(const fs::path& model_dir) {
  ShardedCheckpoint ck;
  ck.dir_ = model_dir;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) {
    throw CheckpointError(model_dir.string(), "not a directory");
  }
  if (fs::is_regular_file(model_dir / kSingleName, ec)) {
    ck.open_single(model_dir / kSingleName);
  } else if (fs::exists(model_dir / kIndexName, ec)) {
    ck.open_indexed(model_dir / kIndexName);
  } else {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(model_dir, ec)) {
      if (e.path().extension() == ".safetensors" && e.is_regular_file()) files.push_back(e.path());
    }
    if (ec) throw CheckpointError(model_dir.string(), "cannot list directory: " + ec.message());
    if (files.empty()) {
      throw CheckpointError(model_dir.string(), std::string("no ") + kSingleName + ", " + kIndexName +
                                                    " or other *.safetensors file in the directory");
    }
    std::sort(files.begin(), files.end());
    ck.open_unindexed(files);
  }
  return ck;
}

void ShardedCheckpoint::add_file(const fs::path& file) {
  files_.push_back(std::make_unique<SafetensorsFile>(file));
}

void ShardedCheckpoint::open_single(const fs::path& file) {
  layout_ = Layout::kSingleFile;
  add_file(file);
  for (const auto& t : files_.back()->tensors()) by_name_.emplace(t.name, Entry{files_.back().get(), &t});
}

void ShardedCheckpoint::open_unindexed(const std::vector<fs::path>& files) {
  layout_ = Layout::kUnindexedShards;
  for (const auto& f : files) {
    add_file(f);
    const SafetensorsFile* file = files_.back().get();
    for (const auto& t : file->tensors()) {
      auto [it, inserted] = by_name_.emplace(t.name, Entry{file, &t});
      if (!inserted) {
        throw CheckpointError(dir_.string(), "tensor '" + t.name + "' is in both " +
                                                 it->second.file->path().filename().string() + " and " +
                                                 f.filename().string() + " (and there is no " +
                                                 kIndexName + " to say which is meant)");
      }
    }
  }
}

void ShardedCheckpoint::open_indexed(const fs::path& index) {
  layout_ = Layout::kIndexed;
  index_path_ = index;
  const std::string path = index.string();
  const nlohmann::json root = parse_json_strict(read_text(index), path, "index");
  if (!root.is_object()) throw CheckpointError(path, "index is not a JSON object");
  if (auto m = root.find("metadata"); m != root.end() && !m->is_null()) {
    if (!m->is_object()) throw CheckpointError(path, "'metadata' must be an object");
    index_metadata_json_ = m->dump();
    if (auto ts = m->find("total_size"); ts != m->end() && ts->is_number_unsigned()) {
      index_total_size_ = ts->get<uint64_t>();
    }
  }
  auto wm = root.find("weight_map");
  if (wm == root.end()) throw CheckpointError(path, "missing 'weight_map'");
  if (!wm->is_object()) throw CheckpointError(path, "'weight_map' must be an object");

  // Open each shard once, in name order, checking it exists before mapping anything.
  std::map<std::string, const SafetensorsFile*> shard_by_name;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) {
      throw CheckpointError(path, "weight_map entry for tensor '" + tensor + "' must be a file name string");
    }
    const auto& name = shard.get_ref<const std::string&>();
    if (!is_safe_relative(name)) {
      throw CheckpointError(path, "shard '" + name + "' (for tensor '" + tensor +
                                      "') is not a relative path inside the model directory");
    }
    if (shard_by_name.count(name)) continue;
    std::error_code ec;
    if (!fs::is_regular_file(dir_ / name, ec)) {
      throw CheckpointError(path, "shard '" + name + "' (for tensor '" + tensor + "') does not exist in " +
                                      dir_.string());
    }
    shard_by_name.emplace(name, nullptr);
  }
  for (auto& [name, file] : shard_by_name) {
    add_file(dir_ / name);
    file = files_.back().get();
  }

  for (const auto& [tensor, shard] : wm->items()) {
    const SafetensorsFile* file = shard_by_name.at(shard.get<std::string>());
    const TensorInfo* info = file->find(tensor);
    if (info == nullptr) {
      throw CheckpointError(path, "tensor '" + tensor + "' is mapped to shard '" + shard.get<std::string>() +
                                      "', which has no such tensor");
    }
    by_name_.emplace(tensor, Entry{file, info});
  }
  for (const auto& f : files_) {
    for (const auto& t : f->tensors()) {
      if (!by_name_.count(t.name) || by_name_.find(t.name)->second.file != f.get()) {
        unindexed_.push_back(t.name);
      }
    }
  }
  std::sort(unindexed_.begin(), unindexed_.end());
}

std::vector<std::string> ShardedCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, _] : by_name_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

ShardedCheckpoint::Entry ShardedCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? Entry{} : it->second;
}

ShardedCheckpoint::Entry ShardedCheckpoint::at(std::string_view name) const {
  Entry e = find(name);
  if (e.info == nullptr) {
    throw CheckpointError(index_path_.empty() ? dir_.string() : index_path_.string(),
                          "no tensor named '" + std::string(name) + "'");
  }
  return e;
}

std::span<const std::byte> ShardedCheckpoint::bytes(std::string_view name) const {
  Entry e = at(name);
  return e.file->bytes(*e.info);
}

bool ShardedCheckpoint::release_pages(std::span<const std::byte> range) const {
  for (const auto& f : files_)
    if (f->release_pages(range)) return true;
  return false;
}

}  // namespace fp4serve
