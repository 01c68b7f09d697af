// Memory for GDN states of many sequences: the engine's state slots and its prefix-cache snapshots
// are each one arena of `entries` x (conv + recurrent state of every GDN layer).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gdn.h"
#include "model/step_batch.h"
#include "model/zeroed_buffer.h"

namespace fp4serve::model {

class GdnStateArena {
 public:
  GdnStateArena() = default;
  GdnStateArena(int entries, int num_gdn_layers, const kernels::GdnDims& dims);

  // Bytes one entry takes (all GDN layers).
  static uint64_t entry_bytes(int num_gdn_layers, const kernels::GdnDims& dims);

  int entries() const { return entries_; }
  GdnStateRef ref(int entry, int layer);
  std::vector<GdnStateRef> refs(int entry);  // every layer
  void zero(int entry);
  // Copies entry `src` of `from` into entry `dst` of this arena (same layer count and dims).
  void copy_from(const GdnStateArena& from, int src, int dst);

 private:
  int entries_ = 0;
  int layers_ = 0;
  int64_t conv_elems_ = 0;  // per layer
  int64_t ssm_elems_ = 0;
  ZeroedBuffer<uint16_t> conv_;  // [entries, layers, conv_elems]
  ZeroedBuffer<float> ssm_;      // [entries, layers, ssm_elems] (calloc'd zeros are +0.0f)
};

}  // namespace fp4serve::model
