// The attention layers' KV cache as a pool of fixed-size blocks (vLLM's layout per layer:
// K and V each [num_blocks, block_size, n_kv_heads, head_dim], bf16 or fp8 e4m3), in device memory
// the backend allocated. The engine's BlockPool hands out block ids; this owns the bytes behind them.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/backend.h"

namespace fp4serve::model {

class PagedKvCache {
 public:
  PagedKvCache() = default;
  PagedKvCache(kernels::Backend& backend, int num_attention_layers, int num_blocks, int block_size, int n_kv_heads,
               int head_dim, kernels::KvDtype dtype);

  // Bytes of one block across all attention layers, K and V.
  static uint64_t block_bytes(int num_attention_layers, int block_size, int n_kv_heads, int head_dim,
                              kernels::KvDtype dtype);

  // The kernels' view of one layer for a sequence whose block table is `block_table` (host memory,
  // alive while the view is used). Throws for a layer or block id outside the pool.
  kernels::KvView view(int layer, std::span<const int32_t> block_table, float k_scale, float v_scale) const;

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  kernels::KvDtype dtype() const { return dtype_; }

 private:
  int layers_ = 0, num_blocks_ = 0, block_size_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  kernels::KvDtype dtype_ = kernels::KvDtype::kBf16;
  size_t layer_bytes_ = 0;        // K (or V) of one layer
  kernels::DeviceBuffer k_, v_;   // [layers, num_blocks, block_size, n_kv_heads, head_dim] x elem
};

}  // namespace fp4serve::model
