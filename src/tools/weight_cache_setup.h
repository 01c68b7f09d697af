// Where the CPU backend's packed-weight cache (kernels/cpu/packed_weight_cache.h) lives and what
// identifies the checkpoint it was made from.
//   file      <model dir>/.fp4serve-weights-<tier>.bin when the model directory is writable (an HF
//             snapshot folder is), else ~/.cache/fp4serve/weights/<hash of the directory>-<tier>.bin
//             ($XDG_CACHE_HOME honoured)
//   identity  per safetensors file: name, size, mtime (ns) and a 64-bit FNV-1a hash of its header;
//             plus hashes of config.json, the quantization configs and the shard index. A
//             re-downloaded or edited checkpoint has another identity, so its cache is refused and
//             rebuilt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "checkpoint/weight_loader.h"

namespace fp4serve::tools {

std::string checkpoint_identity(const LoadedCheckpoint& ck);
std::filesystem::path weight_cache_file(const std::filesystem::path& model_dir, std::string_view tier);
// Free bytes on the file system that would hold `file` (0 when unknown).
uint64_t free_bytes_for(const std::filesystem::path& file);

}  // namespace fp4serve::tools
