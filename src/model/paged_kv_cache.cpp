#include "model/paged_kv_cache.h"

#include <stdexcept>
#include <string>

namespace fp4serve::model {
namespace {
size_t elem_size(kernels::KvDtype dtype) { return dtype == kernels::KvDtype::kBf16 ? 2 : 1; }
}  // namespace

PagedKvCache::PagedKvCache(kernels::Backend& backend, int num_attention_layers, int num_blocks, int block_size,
                           int n_kv_heads, int head_dim, kernels::KvDtype dtype)
    : layers_(num_attention_layers),
      num_blocks_(num_blocks),
      block_size_(block_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      layer_bytes_(static_cast<size_t>(num_blocks) * block_size * n_kv_heads * head_dim * elem_size(dtype)),
      k_(backend.allocate(layer_bytes_ * num_attention_layers, "the KV cache (K)")),
      v_(backend.allocate(layer_bytes_ * num_attention_layers, "the KV cache (V)")) {}

uint64_t PagedKvCache::block_bytes(int num_attention_layers, int block_size, int n_kv_heads, int head_dim,
                                   kernels::KvDtype dtype) {
  return 2ull * num_attention_layers * block_size * n_kv_heads * head_dim * elem_size(dtype);
}

kernels::KvView PagedKvCache::view(int layer, std::span<const int32_t> block_table, float k_scale,
                                   float v_scale) const {
  if (layer < 0 || layer >= layers_) {
    throw std::out_of_range("KV cache layer " + std::to_string(layer) + " of " + std::to_string(layers_));
  }
  for (int32_t b : block_table) {
    if (b < 0 || b >= num_blocks_) {
      throw std::out_of_range("KV block id " + std::to_string(b) + " outside the pool of " +
                              std::to_string(num_blocks_));
    }
  }
  kernels::KvView kv;
  kv.dtype = dtype_;
  kv.k = static_cast<uint8_t*>(k_.data()) + layer_bytes_ * static_cast<size_t>(layer);
  kv.v = static_cast<uint8_t*>(v_.data()) + layer_bytes_ * static_cast<size_t>(layer);
  kv.block_size = block_size_;
  kv.block_table = block_table.data();
  kv.num_table_entries = static_cast<int64_t>(block_table.size());
  kv.n_kv_heads = n_kv_heads_;
  kv.head_dim = head_dim_;
  kv.k_scale = k_scale;
  kv.v_scale = v_scale;
  return kv;
}

}  // namespace fp4serve::model
