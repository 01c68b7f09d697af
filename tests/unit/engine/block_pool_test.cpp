#include "engine/block_pool.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

#include "engine/block_hash.h"
#include "engine/block_hash_table.h"
#include "engine/engine_error.h"

namespace fp4serve::engine {
namespace {

using Ids = std::vector<std::int32_t>;

TEST(BlockPool, AllocatesFromHeadAndFreedBlocksGoToTail) {
  BlockPool pool(5, true);
  EXPECT_EQ(pool.free_queue_order(), (Ids{0, 1, 2, 3, 4}));
  Ids a;
  ASSERT_TRUE(pool.allocate(3, a));
  EXPECT_EQ(a, (Ids{0, 1, 2}));
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.6);
  // Freed in the given (eviction) order, appended after the never-used blocks.
  pool.free(Ids{2, 0});
  EXPECT_EQ(pool.free_queue_order(), (Ids{3, 4, 2, 0}));
  Ids b;
  ASSERT_TRUE(pool.allocate(3, b));
  EXPECT_EQ(b, (Ids{3, 4, 2}));
  Ids c;
  EXPECT_FALSE(pool.allocate(2, c));  // only block 0 left: nothing taken
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(pool.num_free_blocks(), 1);
}

TEST(BlockPool, RefCountsAndDoubleFree) {
  BlockPool pool(3, true);
  Ids a;
  ASSERT_TRUE(pool.allocate(1, a));
  pool.touch(a);  // shared by a second request
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.free(a);
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);  // still held
  pool.free(a);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_THROW(pool.free(a), EngineLogicError);
}

TEST(BlockPool, CachedFreeBlocksStayFindableUntilEvictedInLruOrder) {
  BlockPool pool(4, true);
  Ids a;
  ASSERT_TRUE(pool.allocate(4, a));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.register_block(a[i], 100 + i));
  // Free as a request does: last block first, so its tail is evicted first.
  pool.free(Ids{a[3], a[2], a[1], a[0]});
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pool.lookup(100 + i), a[i]);

  // A hit on a free block takes it out of the free queue.
  pool.touch(Ids{a[0]});
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.free_queue_order(), (Ids{a[3], a[2], a[1]}));

  // Allocation evicts from the head: the old tail block (hash 103) goes first.
  Ids b;
  ASSERT_TRUE(pool.allocate(1, b));
  EXPECT_EQ(b[0], a[3]);
  EXPECT_EQ(pool.lookup(103), -1);
  EXPECT_FALSE(pool.has_hash(a[3]));
  EXPECT_EQ(pool.lookup(102), a[2]);
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.lookup(100), a[0]);  // the touched block is in use, never evicted
}

TEST(BlockPool, DuplicateHashStaysUnregistered) {
  BlockPool pool(2, true);
  Ids a;
  ASSERT_TRUE(pool.allocate(2, a));
  EXPECT_TRUE(pool.register_block(a[0], 7));
  EXPECT_FALSE(pool.register_block(a[1], 7));
  EXPECT_EQ(pool.lookup(7), a[0]);
  EXPECT_EQ(pool.num_registered(), 1);
}

TEST(BlockPool, CachingDisabledNeverHits) {
  BlockPool pool(2, false);
  Ids a;
  ASSERT_TRUE(pool.allocate(1, a));
  EXPECT_FALSE(pool.register_block(a[0], 7));
  EXPECT_EQ(pool.lookup(7), -1);
}

TEST(BlockHash, ChainedToParentAndSensitiveToEverything) {
  const std::vector<std::int32_t> x{1, 2, 3, 4}, y{1, 2, 3, 5};
  const BlockHash hx = hash_block_tokens(kRootBlockHash, x);
  EXPECT_EQ(hx, hash_block_tokens(kRootBlockHash, x));  // deterministic across calls and runs
  EXPECT_NE(hx, hash_block_tokens(kRootBlockHash, y));
  // Same block tokens under different parents: different hashes (whole-prefix identity).
  EXPECT_NE(hash_block_tokens(hx, x), hash_block_tokens(hash_block_tokens(kRootBlockHash, y), x));
  const std::uint64_t salt = 42;
  EXPECT_NE(hx, hash_block_tokens(kRootBlockHash, x, std::span<const std::uint64_t>(&salt, 1)));
  // Extra keys are length-prefixed: "no keys" differs from "one zero key".
  const std::uint64_t zero = 0;
  EXPECT_NE(hx, hash_block_tokens(kRootBlockHash, x, std::span<const std::uint64_t>(&zero, 1)));
}

TEST(BlockHashTable, MatchesAStdMapUnderRandomInsertsAndErases) {
  // Small table and clustered keys so probe runs wrap around and backward shifts happen.
  BlockHashTable table(20);
  std::map<BlockHash, std::int32_t> ref;
  std::mt19937 rng(5);
  for (int it = 0; it < 20000; ++it) {
    const BlockHash key = (rng() % 24) * 64 + (rng() % 3);  // many share a home slot
    if (rng() % 2 == 0 && static_cast<int>(ref.size()) < 20) {
      const bool inserted = table.insert(key, static_cast<std::int32_t>(it));
      EXPECT_EQ(inserted, ref.count(key) == 0);
      if (inserted) ref[key] = static_cast<std::int32_t>(it);
    } else if (!ref.empty()) {
      auto pick = ref.begin();
      std::advance(pick, static_cast<long>(rng() % ref.size()));
      EXPECT_FALSE(table.erase(pick->first, pick->second + 1));  // wrong id: untouched
      EXPECT_TRUE(table.erase(pick->first, pick->second));
      ref.erase(pick);
    }
    ASSERT_EQ(table.size(), static_cast<int>(ref.size()));
  }
  for (BlockHash k = 0; k < 24 * 64 + 3; ++k) {
    auto it = ref.find(k);
    ASSERT_EQ(table.find(k), it == ref.end() ? -1 : it->second) << k;
  }
}

TEST(KvCapacity, FromByteBudget) {
  // 10 attention layers x 2 (K,V) x 2 KV heads x 256 dims x 1 byte (fp8) = 10240 B/token.
  const std::uint64_t per_token = 10ull * 2 * 2 * 256;
  const KvCapacity c = compute_kv_capacity(1ull << 30, per_token, 16, 262144);
  EXPECT_EQ(c.bytes_per_block, 16u * per_token);
  EXPECT_EQ(c.num_blocks, static_cast<std::int64_t>((1ull << 30) / (16u * per_token)));  // 6553
  EXPECT_EQ(c.num_tokens, c.num_blocks * 16);
  EXPECT_NEAR(c.max_concurrency, 6553.0 / 16384.0, 1e-12);
  EXPECT_EQ(c.size_line(), "KV cache size: 104,848 tokens (6553 blocks of 163840 bytes)");
  EXPECT_EQ(c.concurrency_line(), "Maximum concurrency for 262,144 tokens per request: 0.40x");
  EXPECT_THROW(compute_kv_capacity(1, 0, 16, 10), EngineConfigError);
}

}  // namespace
}  // namespace fp4serve::engine
