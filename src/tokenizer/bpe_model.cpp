#include "tokenizer/bpe_model.h"

#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_error.h"
#include "tokenizer/word_cache.h"

namespace fp4serve::tokenizer {
namespace {

std::uint64_t mix(std::uint64_t k) {  // splitmix64 finalizer: cheap, well spread
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

// Words up to this many bytes use the quadratic scan (fast for short words); longer ones (e.g.
// long whitespace runs) use the heap, which is O(n log n).
constexpr std::size_t kSmallWord = 48;

}  // namespace

BpeModel::BpeModel(const std::vector<std::pair<std::string, std::int32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options options,
                   const std::string& what)
    : options_(options), cache_(std::make_unique<WordCache>()) {
  std::int32_t max_id = -1;
  token_to_id_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    if (id < 0) throw TokenizerError(what + ": model.vocab has a negative id for '" + token + "'");
    if (!token_to_id_.emplace(token, id).second)
      throw TokenizerError(what + ": model.vocab lists '" + token + "' twice");
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(std::size_t(max_id + 1), nullptr);
  for (const auto& entry : token_to_id_) {
    if (id_to_token_[entry.second])
      throw TokenizerError(what + ": model.vocab gives id " + std::to_string(entry.second) + " to two tokens");
    id_to_token_[entry.second] = &entry.first;
  }
  if (options_.ignore_merges) {  // only then are whole words looked up by their bytes
    std::string bytes;
    for (const auto& [token, id] : token_to_id_)
      if (byte_level::decode(token, bytes)) bytes_to_id_.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = token_to_id_.find(byte_level::char_for_byte(static_cast<unsigned char>(b)));
    if (it == token_to_id_.end())
      throw TokenizerError(what + ": byte-level vocab lacks the token for byte " + std::to_string(b));
    byte_ids_[b] = it->second;
  }
  std::size_t size = 16;
  while (size < merges.size() * 2) size <<= 1;
  merge_table_.assign(size, MergeSlot{kEmptyKey, 0, 0});
  merge_mask_ = size - 1;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = token_to_id_.find(a), ib = token_to_id_.find(b), im = token_to_id_.find(a + b);
    if (ia == token_to_id_.end() || ib == token_to_id_.end())
      throw TokenizerError(what + ": merge " + std::to_string(rank) + " '" + a + " " + b + "' uses a token not in the vocab");
    if (im == token_to_id_.end())
      throw TokenizerError(what + ": merge " + std::to_string(rank) + " '" + a + " " + b + "' makes a token not in the vocab");
    insert_merge(ia->second, ib->second, std::int32_t(rank), im->second);
  }
  merge_count_ = merges.size();
}

BpeModel::~BpeModel() = default;

void BpeModel::insert_merge(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged) {
  const std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  for (std::uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    MergeSlot& slot = merge_table_[i];
    if (slot.key == kEmptyKey || slot.key == key) {
      slot = MergeSlot{key, rank, merged};  // last wins, like HF's merges HashMap
      return;
    }
  }
}

const BpeModel::MergeSlot* BpeModel::find_merge(std::int32_t left, std::int32_t right) const {
  const std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  for (std::uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& slot = merge_table_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmptyKey) return nullptr;
  }
}

const std::string* BpeModel::id_to_token(std::int32_t id) const {
  if (id < 0 || std::size_t(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[id];
}

std::int32_t BpeModel::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const {
  if (bytes.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(bytes[0])]);
    return;
  }
  if (options_.ignore_merges) {
    const auto it = bytes_to_id_.find(std::string(bytes));
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= WordCache::kMaxWordBytes;
  std::size_t hash = 0;
  if (cacheable) {
    hash = std::hash<std::string_view>{}(bytes);
    if (cache_->lookup(bytes, hash, out)) return;
  }
  const std::size_t first = out.size();
  if (bytes.size() <= kSmallWord) {
    merge_small(bytes, out);
  } else {
    merge_large(bytes, out);
  }
  if (cacheable) cache_->insert(bytes, hash, out.data() + first, out.size() - first);
}

// Repeatedly merges the lowest-ranked adjacent pair, leftmost first on ties. Equivalent to HF's
// heap order (rank, position) because equal ranks mean the same pair.
void BpeModel::merge_small(std::string_view bytes, std::vector<std::int32_t>& out) const {
  std::int32_t ids[kSmallWord];
  std::size_t n = bytes.size();
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(bytes[i])];
  // ranks[i] / merged[i]: the merge of (ids[i], ids[i+1]), or rank INT32_MAX when none.
  std::int32_t ranks[kSmallWord], merged[kSmallWord];
  auto refresh = [&](std::size_t i) {
    const MergeSlot* m = find_merge(ids[i], ids[i + 1]);
    ranks[i] = m ? m->rank : INT32_MAX;
    merged[i] = m ? m->merged : -1;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) refresh(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == INT32_MAX) break;
    ids[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) refresh(best - 1);
    if (best + 1 < n) refresh(best);
  }
  out.insert(out.end(), ids, ids + n);
}

// HF's Word::merge_all: a min-heap of candidate merges (rank, position) over a linked list of
// symbols; stale entries are skipped when popped.
void BpeModel::merge_large(std::string_view bytes, std::vector<std::int32_t>& out) const {
  const std::size_t n = bytes.size();
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym(n);
  for (std::size_t i = 0; i < n; ++i)
    sym[i] = Symbol{byte_ids_[static_cast<unsigned char>(bytes[i])], std::int32_t(i) - 1,
                    (i + 1 < n) ? std::int32_t(i + 1) : -1, true};
  struct Candidate {
    std::int32_t rank, pos, merged, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](std::int32_t pos) {
    const std::int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const MergeSlot* m = find_merge(sym[pos].id, sym[next].id)) heap.push({m->rank, pos, m->merged, sym[next].id});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(std::int32_t(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    const MergeSlot* m = find_merge(left.id, right.id);
    if (!m || m->merged != c.merged) continue;  // stale: a neighbour changed since it was pushed
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (std::int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace fp4serve::tokenizer
