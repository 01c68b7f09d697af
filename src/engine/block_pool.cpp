#include "engine/block_pool.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

namespace {
// 1234567 -> "1,234,567" (vLLM logs token counts with Python's "{:,}").
std::string with_commas(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return v < 0 ? "-" + out : out;
}
}  // namespace

std::string KvCapacity::size_line() const {
  return fmt::format("KV cache size: {} tokens ({} blocks of {} bytes)", with_commas(num_tokens),
                     num_blocks, bytes_per_block);
}

std::string KvCapacity::concurrency_line() const {
  return fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                     with_commas(max_model_len), max_concurrency);
}

KvCapacity compute_kv_capacity(std::uint64_t budget_bytes, std::uint64_t kv_bytes_per_token,
                               int block_size, int max_model_len) {
  if (block_size <= 0 || kv_bytes_per_token == 0 || max_model_len <= 0)
    throw EngineConfigError(fmt::format(
        "KV capacity: block_size {} and kv_bytes_per_token {} and max_model_len {} must be positive",
        block_size, kv_bytes_per_token, max_model_len));
  KvCapacity c;
  c.bytes_per_block = static_cast<std::uint64_t>(block_size) * kv_bytes_per_token;
  c.num_blocks = static_cast<std::int64_t>(budget_bytes / c.bytes_per_block);
  c.num_tokens = c.num_blocks * block_size;
  c.max_model_len = max_model_len;
  const std::int64_t blocks_per_request = (max_model_len + block_size - 1) / block_size;
  c.max_concurrency = static_cast<double>(c.num_blocks) / static_cast<double>(blocks_per_request);
  return c;
}

BlockPool::BlockPool(int num_blocks, bool enable_prefix_caching)
    : blocks_(static_cast<std::size_t>(num_blocks < 0 ? 0 : num_blocks)),
      enable_prefix_caching_(enable_prefix_caching),
      table_(enable_prefix_caching ? num_blocks : 0) {
  if (num_blocks <= 0) throw EngineConfigError(fmt::format("KV block pool: {} blocks", num_blocks));
  for (std::int32_t i = 0; i < num_blocks; ++i) queue_append(i);
}

double BlockPool::usage() const {
  return 1.0 - static_cast<double>(num_free_) / static_cast<double>(blocks_.size());
}

void BlockPool::queue_remove(std::int32_t id) {
  Block& b = blocks_[id];
  if (!b.in_free_queue) throw EngineLogicError(fmt::format("block {} is not free", id));
  if (b.prev >= 0) blocks_[b.prev].next = b.next; else head_ = b.next;
  if (b.next >= 0) blocks_[b.next].prev = b.prev; else tail_ = b.prev;
  b.prev = b.next = -1;
  b.in_free_queue = false;
  --num_free_;
}

void BlockPool::queue_append(std::int32_t id) {
  Block& b = blocks_[id];
  b.prev = tail_;
  b.next = -1;
  if (tail_ >= 0) blocks_[tail_].next = id; else head_ = id;
  tail_ = id;
  b.in_free_queue = true;
  ++num_free_;
}

void BlockPool::queue_prepend(std::int32_t id) {
  Block& b = blocks_[id];
  b.prev = -1;
  b.next = head_;
  if (head_ >= 0) blocks_[head_].prev = id; else tail_ = id;
  head_ = id;
  b.in_free_queue = true;
  ++num_free_;
}

void BlockPool::drop_hash(std::int32_t id) {
  Block& b = blocks_[id];
  if (!b.has_hash) return;
  table_.erase(b.hash, id);
  b.has_hash = false;
  ++num_evictions_;
  if (events_ != nullptr) events_->block_removed(kAttentionGroup, b.hash);
}

bool BlockPool::allocate(int n, std::vector<std::int32_t>& out) {
  if (n < 0 || n > num_free_) return false;
  for (int i = 0; i < n; ++i) {
    const std::int32_t id = head_;
    queue_remove(id);
    drop_hash(id);  // the block is about to be overwritten: evict its prefix-cache entry
    blocks_[id].ref_count = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::touch(std::span<const std::int32_t> block_ids) {
  for (std::int32_t id : block_ids) {
    Block& b = blocks_.at(id);
    if (b.ref_count == 0) queue_remove(id);
    ++b.ref_count;
  }
}

void BlockPool::free(std::span<const std::int32_t> block_ids_in_eviction_order) {
  for (std::int32_t id : block_ids_in_eviction_order) {
    Block& b = blocks_.at(id);
    if (b.ref_count <= 0) throw EngineLogicError(fmt::format("double free of KV block {}", id));
    if (--b.ref_count == 0) queue_append(id);
  }
}

void BlockPool::give_back(std::span<const std::int32_t> block_ids_last_first) {
  for (std::int32_t id : block_ids_last_first) {
    Block& b = blocks_.at(id);
    if (b.ref_count != 1 || b.has_hash)
      throw EngineLogicError(fmt::format("KV block {} given back with ref count {}{}", id, b.ref_count,
                                         b.has_hash ? " and a prefix-cache hash" : ""));
    b.ref_count = 0;
    queue_prepend(id);
  }
}

std::int32_t BlockPool::lookup(BlockHash hash) const {
  return enable_prefix_caching_ ? table_.find(hash) : -1;
}

bool BlockPool::register_block(std::int32_t block_id, BlockHash hash) {
  if (!enable_prefix_caching_) return false;
  Block& b = blocks_.at(block_id);
  if (b.has_hash) {
    if (b.hash == hash) return true;
    throw EngineLogicError(fmt::format("KV block {} registered under two hashes", block_id));
  }
  if (!table_.insert(hash, block_id)) return false;
  b.has_hash = true;
  b.hash = hash;
  return true;
}

std::vector<std::int32_t> BlockPool::free_queue_order() const {
  std::vector<std::int32_t> order;
  for (std::int32_t id = head_; id >= 0; id = blocks_[id].next) order.push_back(id);
  return order;
}

}  // namespace fp4serve::engine
