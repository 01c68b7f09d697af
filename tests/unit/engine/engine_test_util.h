// Shared fixtures for the engine's bookkeeping tests: a scheduler stack without a model.
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/state_snapshot_store.h"

namespace fp4serve::engine::testing {

struct StackConfig {
  int block_size = 4;
  int num_blocks = 64;
  int max_model_len = 128;
  int max_num_batched_tokens = 64;
  int max_num_seqs = 8;
  int num_slots = 8;
  int num_snapshots = 32;  // 0 = no snapshot store (pure-attention model)
  int snapshot_interval = 0;
  int long_prefill_token_threshold = 0;
  bool prefix_caching = true;
  int num_speculative_tokens = 0;
};

// Scheduler + KV cache manager + GDN slots + snapshot store, wired as the engine wires them.
struct Stack {
  explicit Stack(const StackConfig& c, StopChecker stop = {})
      : snapshots(c.num_snapshots),
        kv(KvCacheConfig{c.block_size, c.num_blocks, c.max_model_len, c.prefix_caching},
           c.num_snapshots > 0 ? &snapshots : nullptr),
        slots(c.num_slots),
        sched(SchedulerConfig{c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len,
                              c.long_prefill_token_threshold, c.snapshot_interval, c.num_speculative_tokens},
              kv, slots, c.num_snapshots > 0 ? &snapshots : nullptr, std::move(stop)) {}

  StateSnapshotStore snapshots;
  KvCacheManager kv;
  StateSlotPool slots;
  Scheduler sched;
};

inline std::vector<std::int32_t> iota_tokens(int n, int first = 1000) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The fake model: the token sampled after a sequence of num_tokens tokens depends only on the
// request and that length, as a real greedy model's would on the prefix. So preemption, prefix hits
// and chunking must not change any output.
inline std::int32_t fake_token(const Request& r) {
  return static_cast<std::int32_t>((r.prompt_token_ids()[0] * 31 + r.num_tokens() * 7) % 50);
}

inline std::vector<std::int32_t> run_fake_model(const SchedulerOutput& out) {
  std::vector<std::int32_t> sampled;
  for (const ScheduledRequest& s : out.scheduled)
    sampled.push_back(s.needs_logits ? fake_token(*s.request) : -1);
  return sampled;
}

// A model stand-in that keeps shadow KV blocks (which token each position holds) and shadow GDN
// state (a running hash of the tokens fed), follows the scheduler's instructions exactly (slot init,
// snapshot restore, snapshot copies at in-chunk offsets, KV writes through the block table), and
// checks before every chunk that the slot state and every KV position the chunk attends to are
// exactly what a from-scratch run would have: a prefix hit gives exactly what a miss gives.
class ShadowModel {
 public:
  ShadowModel(int num_blocks, int block_size, int num_slots, int num_snapshots)
      : bs_(block_size),
        kv_(static_cast<std::size_t>(num_blocks) * block_size, -1),
        slots_(static_cast<std::size_t>(num_slots), kPoison),
        snaps_(static_cast<std::size_t>(num_snapshots > 0 ? num_snapshots : 1), kPoison) {}

  static std::uint64_t mix(std::uint64_t state, std::int32_t token) {
    return (state ^ static_cast<std::uint64_t>(token + 1)) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
  }
  static std::uint64_t state_after(const Request& r, int n) {
    std::uint64_t s = 0;
    for (int i = 0; i < n; ++i) s = mix(s, r.all_token_ids()[static_cast<std::size_t>(i)]);
    return s;
  }

  // Returns the sampled tokens; records the first inconsistency in `error`.
  std::vector<std::int32_t> run(const SchedulerOutput& out) {
    std::vector<std::int32_t> sampled;
    for (const ScheduledRequest& s : out.scheduled) {
      const Request& r = *s.request;
      std::uint64_t& slot = slots_.at(static_cast<std::size_t>(s.state_slot));
      if (s.state_init == StateInit::kZero) {
        if (s.start_position != 0) fail(r, "zero state but start > 0");
        slot = 0;
      } else if (s.state_init == StateInit::kRestore) {
        slot = snaps_.at(static_cast<std::size_t>(s.restore_snapshot_id));
      }
      if (slot != state_after(r, s.start_position)) fail(r, "GDN state differs from a fresh run");
      for (int p = 0; p < s.start_position; ++p)
        if (kv_at(s, p) != r.all_token_ids()[static_cast<std::size_t>(p)]) {
          fail(r, "KV position " + std::to_string(p) + " holds the wrong token");
          break;
        }
      const auto points = out.snapshots_of(s);
      std::size_t next_point = 0;
      for (int j = 0; j < s.num_scheduled_tokens; ++j) {
        const int p = s.start_position + j;
        const std::int32_t t = r.all_token_ids()[static_cast<std::size_t>(p)];
        kv_at(s, p) = t;
        slot = mix(slot, t);
        while (next_point < points.size() && points[next_point].after_tokens == j + 1)
          snaps_.at(static_cast<std::size_t>(points[next_point++].snapshot_id)) = slot;
      }
      if (next_point != points.size()) fail(r, "snapshot point outside the chunk");
      sampled.push_back(s.needs_logits ? fake_token(r) : -1);
    }
    return sampled;
  }
  const std::string& error() const { return error_; }

 private:
  static constexpr std::uint64_t kPoison = 0xDEADull;
  std::int32_t& kv_at(const ScheduledRequest& s, int p) {
    return kv_.at(static_cast<std::size_t>(s.block_table[static_cast<std::size_t>(p / bs_)]) * bs_ + p % bs_);
  }
  void fail(const Request& r, const std::string& what) {
    if (error_.empty()) error_ = "request " + r.id() + ": " + what;
  }
  int bs_;
  std::vector<std::int32_t> kv_;
  std::vector<std::uint64_t> slots_;
  std::vector<std::uint64_t> snaps_;
  std::string error_;
};

// One full engine step with the fake model.
inline const std::vector<StepResult>& step(Stack& st) {
  const SchedulerOutput& out = st.sched.schedule();
  return st.sched.update_from_output(run_fake_model(out));
}

}  // namespace fp4serve::engine::testing
