#include "engine/kv_event_encoding.h"

#include <cstring>

#include <msgpack.hpp>

namespace fp4serve::engine {

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_hashes(Packer& pk, const std::vector<std::uint64_t>& hashes) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (std::uint64_t h : hashes) pk.pack_uint64(h);
}

// msgspec writes a float field as float64 always; msgpack-cxx's pack_double would write an integral
// value (a ts of exactly 1.0) as an integer.
void pack_float64(msgpack::sbuffer& buf, double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buf.write(out, sizeof out);
}

const char* group_kind(int group_idx) {
  return group_idx == kGdnStateGroup ? kGdnStateGroupKind : kAttentionGroupKind;
}

void pack_event(Packer& pk, const BlockStoredEvent& e) {
  pk.pack_map(11);
  pack_str(pk, "type");
  pack_str(pk, "BlockStored");
  pack_str(pk, "block_hashes");
  pack_hashes(pk, e.block_hashes);
  pack_str(pk, "parent_block_hash");
  if (e.parent_block_hash) pk.pack_uint64(*e.parent_block_hash);
  else pk.pack_nil();
  pack_str(pk, "token_ids");
  pk.pack_array(static_cast<std::uint32_t>(e.token_ids.size()));
  for (std::int32_t t : e.token_ids) pk.pack_int32(t);
  pack_str(pk, "block_size");
  pk.pack_int32(e.block_size);
  pack_str(pk, "lora_id");
  pk.pack_nil();
  pack_str(pk, "medium");
  pack_str(pk, kMediumPrimary);
  pack_str(pk, "lora_name");
  pk.pack_nil();
  // vLLM always sends the list, one entry per stored block ([None] for a plain block).
  pack_str(pk, "extra_keys");
  pk.pack_array(static_cast<std::uint32_t>(e.extra_keys.size()));
  for (const auto& keys : e.extra_keys) {
    if (!keys) {
      pk.pack_nil();
      continue;
    }
    pk.pack_array(static_cast<std::uint32_t>(keys->size()));
    for (std::uint64_t k : *keys) pk.pack_uint64(k);
  }
  pack_str(pk, "group_idx");
  pk.pack_int32(e.group_idx);
  pack_str(pk, "kv_cache_spec_kind");
  pack_str(pk, group_kind(e.group_idx));
}

void pack_event(Packer& pk, const BlockRemovedEvent& e) {
  pk.pack_map(4);
  pack_str(pk, "type");
  pack_str(pk, "BlockRemoved");
  pack_str(pk, "block_hashes");
  pack_hashes(pk, e.block_hashes);
  pack_str(pk, "medium");
  pack_str(pk, kMediumPrimary);
  pack_str(pk, "group_idx");
  pk.pack_int32(e.group_idx);
}

void pack_event(Packer& pk, const AllBlocksClearedEvent&) {
  pk.pack_map(1);
  pack_str(pk, "type");
  pack_str(pk, "AllBlocksCleared");
}

}  // namespace

std::string encode_kv_event_batch(const KvEventBatch& batch) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  // Positional: msgspec writes every field of an array_like struct, a None rank as nil.
  pk.pack_array(3);
  pack_float64(buf, batch.ts);
  pk.pack_array(static_cast<std::uint32_t>(batch.events.size()));
  for (const KvCacheEvent& e : batch.events) std::visit([&](const auto& ev) { pack_event(pk, ev); }, e);
  if (batch.data_parallel_rank) pk.pack_int32(*batch.data_parallel_rank);
  else pk.pack_nil();
  return std::string(buf.data(), buf.size());
}

}  // namespace fp4serve::engine
