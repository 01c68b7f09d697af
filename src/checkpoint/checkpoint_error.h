// The one exception type of the checkpoint module. Every fault in a model directory (a malformed
// safetensors header, a missing shard, an unknown repo id) is reported with the file it concerns, so
// that a user can tell which of forty shards is broken and why.
#pragma once

#include <stdexcept>
#include <string>

namespace fp4serve {

class CheckpointError : public std::runtime_error {
 public:
  // what() reads "<path>: <fault>".
  CheckpointError(const std::string& path, const std::string& fault)
      : std::runtime_error(path + ": " + fault), path_(path), fault_(fault) {}

  const std::string& path() const { return path_; }
  const std::string& fault() const { return fault_; }

 private:
  std::string path_;
  std::string fault_;
};

}  // namespace fp4serve
