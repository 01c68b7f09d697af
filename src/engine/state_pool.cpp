#include "engine/state_pool.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

std::string format_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

StateSlotPool::StateSlotPool(int num_slots) {
  if (num_slots <= 0) throw EngineConfigError(fmt::format("GDN state pool: {} slots", num_slots));
  in_use_.assign(static_cast<std::size_t>(num_slots), 0);
  free_stack_.reserve(static_cast<std::size_t>(num_slots));
  for (int s = num_slots - 1; s >= 0; --s) free_stack_.push_back(s);
}

int StateSlotPool::slots_for_budget(std::uint64_t budget_bytes, std::uint64_t per_sequence_bytes) {
  if (per_sequence_bytes == 0) throw EngineConfigError("GDN state: per-sequence state bytes is 0");
  const std::uint64_t n = budget_bytes / per_sequence_bytes;
  return n > 1'000'000'000u ? 1'000'000'000 : static_cast<int>(n);
}

int StateSlotPool::check_max_num_seqs(int max_num_seqs, std::uint64_t per_sequence_bytes,
                                      std::uint64_t budget_bytes) {
  const int slots = slots_for_budget(budget_bytes, per_sequence_bytes);
  if (max_num_seqs > slots) {
    throw EngineConfigError(fmt::format(
        "--max-num-seqs {} needs {} GDN state slots x {} = {}, but the state budget is {} ({} "
        "slots); lower --max-num-seqs to {} or raise the state budget",
        max_num_seqs, max_num_seqs, format_bytes(per_sequence_bytes),
        format_bytes(per_sequence_bytes * static_cast<std::uint64_t>(max_num_seqs)),
        format_bytes(budget_bytes), slots, slots));
  }
  return slots;
}

int StateSlotPool::allocate() {
  if (free_stack_.empty()) return -1;
  const int s = free_stack_.back();
  free_stack_.pop_back();
  in_use_[static_cast<std::size_t>(s)] = 1;
  return s;
}

void StateSlotPool::free(int slot) {
  if (slot < 0 || slot >= num_slots() || !in_use_[static_cast<std::size_t>(slot)])
    throw EngineLogicError(fmt::format("GDN state slot {} freed but not in use", slot));
  in_use_[static_cast<std::size_t>(slot)] = 0;
  free_stack_.push_back(slot);
}

}  // namespace fp4serve::engine
