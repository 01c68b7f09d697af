// GDN (linear-attention) state slots: one fixed slot per running sequence holding the conv and
// recurrent state of every GDN layer. The pool is sized from a byte budget at start-up, and it bounds
// --max-num-seqs: a value the pool cannot hold is refused with the arithmetic in the message.
// Only ids are handed out here; the model owns the memory behind them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4serve::engine {

// "61.4 MiB", "15.7 GiB", "512 B": binary units, one decimal.
std::string format_bytes(std::uint64_t bytes);

class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots);

  // How many slots of per_sequence_bytes fit in budget_bytes.
  static int slots_for_budget(std::uint64_t budget_bytes, std::uint64_t per_sequence_bytes);
  // Throws EngineConfigError when max_num_seqs sequences' state does not fit the budget, e.g.
  // "--max-num-seqs 256 needs 256 GDN state slots x 61.4 MiB = 15.4 GiB, but the state budget is
  // 8.0 GiB (133 slots)". Returns the slot count otherwise.
  static int check_max_num_seqs(int max_num_seqs, std::uint64_t per_sequence_bytes,
                                std::uint64_t budget_bytes);

  // A free slot id, or -1 when all are taken.
  int allocate();
  void free(int slot);  // EngineLogicError on a slot not in use

  int num_slots() const { return static_cast<int>(in_use_.size()); }
  int num_free() const { return static_cast<int>(free_stack_.size()); }
  bool in_use(int slot) const { return in_use_.at(static_cast<std::size_t>(slot)) != 0; }

 private:
  std::vector<int> free_stack_;       // lowest ids on top, so small batches use low slots
  std::vector<std::uint8_t> in_use_;
};

}  // namespace fp4serve::engine
