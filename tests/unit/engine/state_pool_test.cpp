#include "engine/state_pool.h"

#include <gtest/gtest.h>

#include "engine/engine_error.h"
#include "engine/state_snapshot_store.h"

namespace fp4serve::engine {
namespace {

TEST(StateSlotPool, AllocatesUniqueSlotsAndRefusesDoubleFree) {
  StateSlotPool pool(3);
  const int a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 2);
  EXPECT_EQ(pool.allocate(), -1);
  pool.free(b);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.allocate(), b);
  pool.free(a);
  EXPECT_THROW(pool.free(a), EngineLogicError);
  EXPECT_THROW(pool.free(7), EngineLogicError);
}

TEST(StateSlotPool, BudgetArithmeticAndRefusalMessage) {
  const std::uint64_t per_seq = 64'382'156;  // ~61.4 MiB of GDN state per sequence
  const std::uint64_t budget = 8ull << 30;
  EXPECT_EQ(StateSlotPool::slots_for_budget(budget, per_seq), 133);
  EXPECT_EQ(StateSlotPool::check_max_num_seqs(133, per_seq, budget), 133);
  try {
    StateSlotPool::check_max_num_seqs(256, per_seq, budget);
    FAIL() << "256 sequences do not fit";
  } catch (const EngineConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--max-num-seqs 256 needs 256 GDN state slots x 61.4 MiB = 15.3 GiB, but the state "
              "budget is 8.0 GiB (133 slots); lower --max-num-seqs to 133 or raise the state budget");
  }
}

TEST(StateSlotPool, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(8ull << 30), "8.0 GiB");
}

TEST(StateSnapshotStore, LifecycleAndLruEviction) {
  StateSnapshotStore s(2);
  const int a = s.reserve(), b = s.reserve();
  EXPECT_EQ(s.reserve(), -1);  // both pending: never evicted
  EXPECT_EQ(s.find(11), -1);   // pending is not findable
  ASSERT_TRUE(s.commit(a, 11, 16));
  ASSERT_TRUE(s.commit(b, 22, 32));
  EXPECT_EQ(s.find(11), a);
  EXPECT_EQ(s.num_tokens(b), 32);
  s.touch(a);  // b is now the least recently used
  const int c = s.reserve();
  EXPECT_EQ(c, b);
  EXPECT_EQ(s.find(22), -1);
  EXPECT_EQ(s.num_evictions(), 1);
  // Duplicate key: the second copy is released, not stored twice.
  EXPECT_FALSE(s.commit(c, 11, 16));
  EXPECT_EQ(s.num_free(), 1);
  EXPECT_EQ(s.num_committed(), 1);
}

TEST(StateSnapshotStore, PinnedSnapshotsAreNotEvicted) {
  StateSnapshotStore s(2);
  const int a = s.reserve(), b = s.reserve();
  s.commit(a, 1, 4);
  s.commit(b, 2, 8);
  s.pin(a);
  s.touch(b);  // a is oldest but pinned
  EXPECT_EQ(s.reserve(), b);
  EXPECT_EQ(s.reserve(), -1);
  s.unpin(a);
  EXPECT_EQ(s.reserve(), a);
  EXPECT_THROW(s.unpin(a), EngineLogicError);
  EXPECT_EQ(s.num_pending(), 2);
}

TEST(StateSnapshotStore, ZeroCapacityDisablesSnapshots) {
  StateSnapshotStore s(0);
  EXPECT_EQ(s.reserve(), -1);
  EXPECT_EQ(s.find(1), -1);
  EXPECT_EQ(StateSnapshotStore::capacity_for_budget(1ull << 30, 64'382'156), 16);
}

}  // namespace
}  // namespace fp4serve::engine
