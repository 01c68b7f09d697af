// A fixed-capacity map BlockHash -> id (block id or snapshot id), open addressing with linear
// probing and backward-shift deletion. Sized once at construction so inserting on the step path
// never allocates (std::unordered_map allocates a node per insert).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/block_hash.h"

namespace fp4serve::engine {

class BlockHashTable {
 public:
  // Holds at most max_entries keys; the table is kept at most half full.
  explicit BlockHashTable(int max_entries);

  // Id stored for key, or -1.
  std::int32_t find(BlockHash key) const;
  // Inserts key -> id; returns false (and changes nothing) if the key is already present.
  // Inserting beyond max_entries is an EngineLogicError.
  bool insert(BlockHash key, std::int32_t id);
  // Removes key if it maps to id; returns whether it did.
  bool erase(BlockHash key, std::int32_t id);
  int size() const { return size_; }

 private:
  struct Slot {
    BlockHash key = 0;
    std::int32_t id = -1;  // -1 = empty
  };
  std::size_t home(BlockHash key) const { return static_cast<std::size_t>(key) & mask_; }

  std::vector<Slot> slots_;
  std::size_t mask_;
  int max_entries_;
  int size_ = 0;
};

}  // namespace fp4serve::engine
