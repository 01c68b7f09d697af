// KV cache events (vLLM's KVEventBatch): the msgpack bytes, the emit points in the prefix cache, and
// the ZMQ publisher's live and replay frames.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "engine/engine_error.h"
#include "engine/kv_event_encoding.h"
#include "engine/kv_event_publisher.h"
#include "engine/kv_events.h"
#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::iota_tokens;
using testing::Stack;
using testing::StackConfig;

std::string hex(const std::string& bytes) {
  std::string out;
  char buf[3];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// tools/reference/kv_event_golden.py: the same batch through vLLM's msgspec classes.
TEST(KvEventEncoding, IsVllmsMsgspecBytes) {
  KvEventBatch b;
  b.ts = 1764672000.25;
  BlockStoredEvent s0;
  s0.block_hashes = {~0ull, 7};
  s0.token_ids = {1, 300, 70000, 0};
  s0.block_size = 2;
  s0.extra_keys = {std::vector<std::uint64_t>{0x8000000000000001ull}, std::nullopt};
  s0.group_idx = kAttentionGroup;
  BlockStoredEvent s1;
  s1.block_hashes = {7};
  s1.parent_block_hash = ~0ull;
  s1.token_ids = {70000, 0};
  s1.block_size = 2;
  s1.extra_keys = {std::nullopt};
  s1.group_idx = kGdnStateGroup;
  BlockRemovedEvent r;
  r.block_hashes = {7};
  r.group_idx = kGdnStateGroup;
  b.events = {s0, s1, r, AllBlocksClearedEvent{}};
  b.data_parallel_rank = 0;
  EXPECT_EQ(hex(encode_kv_event_batch(b)),
            "93cb41da4bb080100000948ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cfffffffffffffff"
            "ff07b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401cd012cce0001117000aa626c6f636b5f73"
            "697a6502a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b6579739291cf80"
            "00000000000001c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74"
            "696f6e8ba474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739107b1706172656e745f626c6f636b5f"
            "68617368cfffffffffffffffffa9746f6b656e5f69647392ce0001117000aa626c6f636b5f73697a6502a76c6f72615f6964"
            "c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647801b26b76"
            "5f63616368655f737065635f6b696e64a56d616d626184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861"
            "736865739107a66d656469756da3475055a967726f75705f6964780181a474797065b0416c6c426c6f636b73436c65617265"
            "6400");
  // msgspec: no rank is nil (array_like writes every field); an integral ts is still a float64.
  KvEventBatch empty;
  empty.ts = 2.0;
  EXPECT_EQ(hex(encode_kv_event_batch(empty)), "93cb400000000000000090c0");
}

// A scheduler stack whose cache reports into `log`.
struct EventStack {
  explicit EventStack(const StackConfig& c) : st(c) {
    st.kv.set_event_recorder(&log);
    st.snapshots.set_event_recorder(&log);
  }
  void run() {
    for (int i = 0; i < 1000 && st.sched.has_unfinished_requests(); ++i) testing::step(st);
    ASSERT_FALSE(st.sched.has_unfinished_requests());
  }
  Stack st;
  KvEventRecorder log;
};

std::vector<BlockStoredEvent> stores(const std::vector<KvCacheEvent>& events, int group) {
  std::vector<BlockStoredEvent> out;
  for (const auto& e : events)
    if (const auto* s = std::get_if<BlockStoredEvent>(&e); s && s->group_idx == group) out.push_back(*s);
  return out;
}

std::multiset<std::uint64_t> removed(const std::vector<KvCacheEvent>& events, int group) {
  std::multiset<std::uint64_t> out;
  for (const auto& e : events)
    if (const auto* r = std::get_if<BlockRemovedEvent>(&e); r && r->group_idx == group)
      out.insert(r->block_hashes.begin(), r->block_hashes.end());
  return out;
}

TEST(KvEvents, FullBlocksOfAPromptAreStoredWithTheirTokensAndTheSnapshotBlock) {
  EventStack es(StackConfig{});  // block 4; snapshots at the prompt's last boundary and the tail
  const auto prompt = iota_tokens(10);
  es.st.sched.add_request("a", prompt, 1);
  es.run();
  const auto events = es.log.take();
  const auto attn = stores(events, kAttentionGroup);
  ASSERT_EQ(attn.size(), 1u);
  // The prompt's two full blocks, chained from the fixed root; the partial third block is not stored.
  const BlockHash h0 = hash_block_tokens(kRootBlockHash, std::span(prompt).subspan(0, 4));
  const BlockHash h1 = hash_block_tokens(h0, std::span(prompt).subspan(4, 4));
  EXPECT_EQ(attn[0].block_hashes, (std::vector<std::uint64_t>{h0, h1}));
  EXPECT_FALSE(attn[0].parent_block_hash.has_value());
  EXPECT_EQ(attn[0].token_ids, std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 8));
  EXPECT_EQ(attn[0].block_size, 4);
  ASSERT_EQ(attn[0].extra_keys.size(), 2u);
  EXPECT_FALSE(attn[0].extra_keys[0].has_value());
  // The GDN snapshot at token 8 (the last boundary before the prompt's last token): group 1, one block.
  const auto gdn = stores(events, kGdnStateGroup);
  ASSERT_EQ(gdn.size(), 1u);
  EXPECT_EQ(gdn[0].block_hashes, (std::vector<std::uint64_t>{h1}));
  EXPECT_EQ(gdn[0].parent_block_hash, std::optional<std::uint64_t>(h0));
  EXPECT_EQ(gdn[0].token_ids, std::vector<std::int32_t>(prompt.begin() + 4, prompt.begin() + 8));
  EXPECT_TRUE(removed(events, kAttentionGroup).empty());

  // The same prompt again: a hit, nothing new to store.
  es.st.sched.add_request("b", prompt, 1);
  es.run();
  EXPECT_TRUE(stores(es.log.take(), kAttentionGroup).empty());
}

TEST(KvEvents, CacheSaltIsTheFirstBlocksExtraKeyAndChangesEveryHash) {
  EventStack es(StackConfig{});
  const auto prompt = iota_tokens(9);
  const std::uint64_t salt = cache_salt_key("tenant-a");
  es.st.sched.add_request("a", prompt, 1, salt);
  es.st.sched.add_request("b", prompt, 1);
  es.run();
  const auto attn = stores(es.log.take(), kAttentionGroup);
  ASSERT_EQ(attn.size(), 2u);
  const BlockStoredEvent& salted = attn[0].extra_keys[0] ? attn[0] : attn[1];
  const BlockStoredEvent& plain = attn[0].extra_keys[0] ? attn[1] : attn[0];
  ASSERT_TRUE(salted.extra_keys[0].has_value());
  EXPECT_EQ(*salted.extra_keys[0], (std::vector<std::uint64_t>{salt}));
  EXPECT_FALSE(salted.extra_keys[1].has_value());
  const std::uint64_t keys[] = {salt};
  EXPECT_EQ(salted.block_hashes[0], hash_block_tokens(kRootBlockHash, std::span(prompt).subspan(0, 4), keys));
  EXPECT_NE(salted.block_hashes[0], plain.block_hashes[0]);
  EXPECT_NE(salted.block_hashes[1], plain.block_hashes[1]);
  EXPECT_EQ(salt, cache_salt_key("tenant-a"));
  EXPECT_EQ(salt & 1, 1u);
}

TEST(KvEvents, EvictionRemovesEachStoredHashOnceEvenWhenTwoRequestsComputedItAtOnce) {
  StackConfig c;
  c.num_blocks = 8;  // 32 tokens of KV
  c.max_model_len = 32;
  c.num_snapshots = 2;
  EventStack es(c);
  // Two identical prompts in one step: both miss, only one copy of each block is registered.
  es.st.sched.add_request("a", iota_tokens(9), 1);
  es.st.sched.add_request("b", iota_tokens(9), 1);
  es.run();
  // A long other prompt takes every block: the cached ones are evicted.
  es.st.sched.add_request("c", iota_tokens(28, 5000), 1);
  es.run();
  const auto events = es.log.take();
  std::multiset<std::uint64_t> stored_attn, stored_gdn;
  for (const auto& s : stores(events, kAttentionGroup)) stored_attn.insert(s.block_hashes.begin(), s.block_hashes.end());
  for (const auto& s : stores(events, kGdnStateGroup)) stored_gdn.insert(s.block_hashes.begin(), s.block_hashes.end());
  const auto prompt = iota_tokens(9);
  const BlockHash a0 = hash_block_tokens(kRootBlockHash, std::span(prompt).subspan(0, 4));
  EXPECT_EQ(stored_attn.count(a0), 1u) << "the duplicate copy was reported";
  // Every block "a" stored is gone (8 blocks, 7 needed by "c"), each removal matching one store.
  const auto gone = removed(events, kAttentionGroup);
  EXPECT_EQ(gone.count(a0), 1u);
  for (std::uint64_t h : gone) EXPECT_EQ(stored_attn.count(h), 1u) << "removal of a hash never stored";
  // Two snapshot ids: c's snapshots evict a's, reported in group 1.
  const auto gdn_gone = removed(events, kGdnStateGroup);
  EXPECT_FALSE(gdn_gone.empty());
  for (std::uint64_t h : gdn_gone) EXPECT_EQ(stored_gdn.count(h), 1u);
}

TEST(KvEvents, ARecorderTakenAwayRecordsNothing) {
  StackConfig c;
  c.num_blocks = 8;
  c.max_model_len = 32;
  EventStack es(c);
  es.st.kv.set_event_recorder(nullptr);
  es.st.snapshots.set_event_recorder(nullptr);
  es.st.sched.add_request("a", iota_tokens(20), 1);
  es.run();
  es.st.sched.add_request("b", iota_tokens(28, 5000), 1);  // evicts a's blocks
  es.run();
  EXPECT_GT(es.st.kv.pool().num_evictions(), 0);
  EXPECT_TRUE(es.log.empty());
}

std::vector<std::string> recv_all(zmq::socket_t& s) {
  std::vector<zmq::message_t> msgs;
  if (!zmq::recv_multipart(s, std::back_inserter(msgs))) return {};
  std::vector<std::string> out;
  for (auto& m : msgs) out.emplace_back(static_cast<const char*>(m.data()), m.size());
  return out;
}

std::uint64_t be64(const std::string& b) {
  std::uint64_t v = 0;
  for (unsigned char c : b) v = (v << 8) | c;
  return v;
}

TEST(KvEventPublisher, PublishesTopicSequencePayloadAndReplaysFromASequence) {
  const std::string base = "ipc:///tmp/fp4serve-kv-events-test-" + std::to_string(::getpid());
  KvEventsConfig c;
  c.enable_kv_cache_events = true;
  c.publisher = "zmq";
  c.endpoint = base + "-pub";
  c.replay_endpoint = base + "-replay";
  c.topic = "kv@test";
  c.buffer_steps = 2;
  KvEventPublisher pub(c);
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect(c.endpoint);
  // PUB drops what it sends before the subscription arrives: publish until one is received.
  std::vector<std::string> first;
  sub.set(zmq::sockopt::rcvtimeo, 50);
  for (int i = 0; i < 100 && first.empty(); ++i) {
    KvEventBatch b;
    b.ts = 1.0;
    pub.publish(b);
    first = recv_all(sub);
  }
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0], "kv@test");
  ASSERT_EQ(first[1].size(), 8u);
  const std::uint64_t seq0 = be64(first[1]);
  EXPECT_EQ(hex(first[2]), "93cb3ff000000000000090" "00");  // [1.0, [], 0]: the rank is filled in
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  for (int i = 0; i < 3; ++i) {
    KvEventBatch b;
    b.ts = 2.0 + i;
    ASSERT_TRUE(pub.publish(b));
    const auto m = recv_all(sub);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(be64(m[1]), seq0 + 1 + static_cast<std::uint64_t>(i)) << "sequence numbers are consecutive";
  }
  // Replay from seq0 + 2: buffer_steps 2 kept seq0 + 2 and seq0 + 3; then the end marker. A DEALER
  // sees every reply (a REQ socket only the first).
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(*c.replay_endpoint);
  const std::uint64_t start = seq0 + 2;
  std::string start_bytes(8, '\0');
  for (int i = 0; i < 8; ++i) start_bytes[static_cast<std::size_t>(i)] = static_cast<char>(start >> (56 - 8 * i));
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start_bytes));
  const auto r1 = recv_all(dealer);
  ASSERT_EQ(r1.size(), 4u);
  EXPECT_EQ(r1[0], "");
  EXPECT_EQ(r1[1], "kv@test");
  EXPECT_EQ(be64(r1[2]), seq0 + 2);
  EXPECT_EQ(hex(r1[3]), "93cb40080000000000009000");  // ts 3.0
  const auto r2 = recv_all(dealer);
  ASSERT_EQ(r2.size(), 4u);
  EXPECT_EQ(be64(r2[2]), seq0 + 3);
  const auto end = recv_all(dealer);
  ASSERT_EQ(end.size(), 4u);
  EXPECT_EQ(end[1], "");
  EXPECT_EQ(hex(end[2]), "ffffffffffffffff");
  EXPECT_EQ(end[3], "");
  // A malformed request (two frames after the delimiter) is ignored; the socket keeps serving.
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::str_buffer("x"), zmq::send_flags::sndmore);
  dealer.send(zmq::str_buffer("y"));
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start_bytes));
  EXPECT_EQ(be64(recv_all(dealer)[2]), seq0 + 2);
  pub.shutdown();
  EXPECT_FALSE(pub.publish(KvEventBatch{})) << "a stopped publisher takes nothing";
  EXPECT_EQ(pub.num_dropped(), 0u);
}

TEST(KvEventPublisher, AFullQueueDropsInsteadOfBlockingAndAccountsForEveryBatch) {
  KvEventsConfig c;
  c.enable_kv_cache_events = true;
  c.publisher = "zmq";
  c.endpoint = "ipc:///tmp/fp4serve-kv-events-drop-" + std::to_string(::getpid());
  c.max_queue_size = 1;
  c.buffer_steps = 0;
  KvEventPublisher pub(c);
  constexpr int kBatches = 20000;  // far faster than the thread can encode and send them one by one
  std::uint64_t accepted = 0;
  for (int i = 0; i < kBatches; ++i) {
    KvEventBatch b;
    b.events.push_back(BlockRemovedEvent{{static_cast<std::uint64_t>(i)}, kAttentionGroup});
    accepted += pub.publish(std::move(b)) ? 1 : 0;
  }
  pub.shutdown();
  EXPECT_GT(pub.num_dropped(), 0u);
  EXPECT_EQ(pub.num_published(), accepted) << "every accepted batch is sent, even at shutdown";
  EXPECT_EQ(pub.num_published() + pub.num_dropped(), static_cast<std::uint64_t>(kBatches));
}

TEST(KvEventPublisher, ABusyEndpointIsAConfigErrorNamingIt) {
  KvEventsConfig c;
  c.enable_kv_cache_events = true;
  c.publisher = "zmq";
  c.endpoint = "tcp://*:0";  // any free port
  KvEventPublisher first(c);
  const std::string port = first.pub_address().substr(first.pub_address().rfind(':') + 1);
  KvEventsConfig d = c;
  d.endpoint = "tcp://*:" + port;
  try {
    KvEventPublisher second(d);
    FAIL() << "bound a port in use: " << d.endpoint;
  } catch (const EngineConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(d.endpoint), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fp4serve::engine
