// Identical concurrent prompts share one prefill: a request whose prompt (token ids and cache salt)
// equals that of a request still computing its prompt is held as a fork child of it
// (Scheduler::add_fork_child) instead of computing the same prompt again -- the n > 1 mechanism,
// across requests. The prefix cache covers prompts that arrive after the first one has finished
// its prefill; this covers the ones that arrive while it runs (a burst of identical requests, a
// benchmark sending one prompt at concurrency N).
//
// The index only remembers candidates; the engine checks each one against the scheduler when it
// looks (the source may have finished its prefill, been aborted or finished since).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fp4serve::engine {

class PromptTwinIndex {
 public:
  // xxHash64 of the token ids, mixed with the cache salt (requests with different salts never share).
  static std::uint64_t key(std::span<const std::int32_t> prompt, std::uint64_t cache_salt_hash);

  // Registers a request that computes its prompt itself.
  void add(std::uint64_t key, std::string request_id);
  // Forgets the request (its prefill ended or it finished); unknown pairs are ignored.
  void remove(std::uint64_t key, std::string_view request_id);

  // The first registered request under `key` that `usable` accepts; the ones it rejects are
  // forgotten (they can never become usable again: a prefill only moves forward). Null if none.
  const std::string* find(std::uint64_t key, const std::function<bool(const std::string&)>& usable);

  std::size_t size() const { return entries_.size(); }

 private:
  std::unordered_multimap<std::uint64_t, std::string> entries_;
};

}  // namespace fp4serve::engine
