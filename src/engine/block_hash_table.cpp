#include "engine/block_hash_table.h"

#include <bit>

#include "engine/engine_error.h"

namespace fp4serve::engine {

BlockHashTable::BlockHashTable(int max_entries) : max_entries_(max_entries < 0 ? 0 : max_entries) {
  const std::size_t capacity =
      std::bit_ceil(static_cast<std::size_t>(2 * static_cast<std::size_t>(max_entries_) + 2));
  slots_.resize(capacity);
  mask_ = capacity - 1;
}

std::int32_t BlockHashTable::find(BlockHash key) const {
  for (std::size_t i = home(key);; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.key == key) return s.id;
  }
}

bool BlockHashTable::insert(BlockHash key, std::int32_t id) {
  std::size_t i = home(key);
  for (; slots_[i].id >= 0; i = (i + 1) & mask_)
    if (slots_[i].key == key) return false;
  if (size_ >= max_entries_) throw EngineLogicError("BlockHashTable: more entries than capacity");
  slots_[i] = Slot{key, id};
  ++size_;
  return true;
}

bool BlockHashTable::erase(BlockHash key, std::int32_t id) {
  std::size_t i = home(key);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].id < 0) return false;
    if (slots_[i].key == key) break;
  }
  if (slots_[i].id != id) return false;
  // Backward-shift deletion: pull later entries of the probe run into the hole when their home
  // position does not lie cyclically in (hole, current].
  std::size_t hole = i;
  for (std::size_t j = (hole + 1) & mask_; slots_[j].id >= 0; j = (j + 1) & mask_) {
    const std::size_t h = home(slots_[j].key);
    const bool stays = (hole <= j) ? (hole < h && h <= j) : (hole < h || h <= j);
    if (!stays) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

}  // namespace fp4serve::engine
