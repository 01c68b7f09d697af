#include "engine/state_snapshot_store.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

StateSnapshotStore::StateSnapshotStore(int capacity)
    : entries_(static_cast<std::size_t>(capacity < 0 ? 0 : capacity)),
      table_(capacity < 0 ? 0 : capacity) {
  free_ids_.reserve(entries_.size());
  for (int i = capacity - 1; i >= 0; --i) free_ids_.push_back(i);
}

int StateSnapshotStore::capacity_for_budget(std::uint64_t budget_bytes,
                                            std::uint64_t snapshot_bytes) {
  if (snapshot_bytes == 0) throw EngineConfigError("GDN snapshot: snapshot bytes is 0");
  const std::uint64_t n = budget_bytes / snapshot_bytes;
  return n > 1'000'000'000u ? 1'000'000'000 : static_cast<int>(n);
}

StateSnapshotStore::Entry& StateSnapshotStore::entry(int id) {
  if (id < 0 || id >= capacity()) throw EngineLogicError(fmt::format("snapshot id {} out of range", id));
  return entries_[static_cast<std::size_t>(id)];
}

void StateSnapshotStore::lru_remove(int id) {
  Entry& e = entries_[static_cast<std::size_t>(id)];
  if (e.prev >= 0) entries_[static_cast<std::size_t>(e.prev)].next = e.next; else lru_head_ = e.next;
  if (e.next >= 0) entries_[static_cast<std::size_t>(e.next)].prev = e.prev; else lru_tail_ = e.prev;
  e.prev = e.next = -1;
}

void StateSnapshotStore::lru_append(int id) {
  Entry& e = entries_[static_cast<std::size_t>(id)];
  e.prev = lru_tail_;
  e.next = -1;
  if (lru_tail_ >= 0) entries_[static_cast<std::size_t>(lru_tail_)].next = id; else lru_head_ = id;
  lru_tail_ = id;
}

int StateSnapshotStore::find(BlockHash key) const { return table_.find(key); }

int StateSnapshotStore::reserve() {
  int id = -1;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    // Oldest committed snapshot nobody is restoring right now. Pins are few (one per request
    // admitted this step), so the walk is short.
    for (int c = lru_head_; c >= 0; c = entries_[static_cast<std::size_t>(c)].next) {
      if (entries_[static_cast<std::size_t>(c)].pins == 0) {
        id = c;
        break;
      }
    }
    if (id < 0) return -1;
    Entry& e = entries_[static_cast<std::size_t>(id)];
    lru_remove(id);
    table_.erase(e.key, id);
    ++num_evictions_;
    if (events_ != nullptr) events_->block_removed(kGdnStateGroup, e.key);
  }
  Entry& e = entries_[static_cast<std::size_t>(id)];
  e = Entry{};
  e.state = State::kPending;
  ++num_pending_;
  return id;
}

bool StateSnapshotStore::commit(int id, BlockHash key, int num_tokens) {
  Entry& e = entry(id);
  if (e.state != State::kPending)
    throw EngineLogicError(fmt::format("snapshot {} committed but not pending", id));
  if (!table_.insert(key, id)) {
    release(id);
    return false;
  }
  --num_pending_;
  e.state = State::kCommitted;
  e.key = key;
  e.num_tokens = num_tokens;
  lru_append(id);
  return true;
}

void StateSnapshotStore::release(int id) {
  Entry& e = entry(id);
  if (e.state != State::kPending)
    throw EngineLogicError(fmt::format("snapshot {} released but not pending", id));
  e = Entry{};
  --num_pending_;
  free_ids_.push_back(id);
}

void StateSnapshotStore::pin(int id) {
  Entry& e = entry(id);
  if (e.state != State::kCommitted)
    throw EngineLogicError(fmt::format("snapshot {} pinned but not committed", id));
  if (e.pins++ == 0) ++num_pinned_;
  touch(id);
}

void StateSnapshotStore::unpin(int id) {
  Entry& e = entry(id);
  if (e.state != State::kCommitted || e.pins <= 0)
    throw EngineLogicError(fmt::format("snapshot {} unpinned but not pinned", id));
  if (--e.pins == 0) --num_pinned_;
}

void StateSnapshotStore::touch(int id) {
  if (entry(id).state != State::kCommitted) return;
  lru_remove(id);
  lru_append(id);
}

}  // namespace fp4serve::engine
