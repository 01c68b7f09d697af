// Memory for GDN states of many sequences: the engine's state slots and its prefix-cache snapshots
// are each one arena of `entries` x (conv + recurrent state of every GDN layer), in device memory the
// backend allocated; zeroing and copying entries are backend ops.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/backend.h"
#include "model/step_batch.h"

namespace fp4serve::model {

class GdnStateArena {
 public:
  GdnStateArena() = default;
  GdnStateArena(kernels::Backend& backend, int entries, int num_gdn_layers, const kernels::GdnDims& dims);

  // Bytes one entry takes (all GDN layers).
  static uint64_t entry_bytes(int num_gdn_layers, const kernels::GdnDims& dims);

  int entries() const { return entries_; }
  int layers() const { return layers_; }
  GdnStateRef ref(int entry, int layer) const;
  // Every layer's state of `entry` into out (out.size() == layers()).
  void refs(int entry, std::span<GdnStateRef> out) const;
  void zero(int entry);
  // Copies entry `src` of `from` into entry `dst` of this arena (same layer count and dims).
  void copy_from(const GdnStateArena& from, int src, int dst);

 private:
  kernels::Backend* backend_ = nullptr;
  kernels::GdnDims dims_;
  int entries_ = 0;
  int layers_ = 0;
  int64_t conv_elems_ = 0;  // per layer
  int64_t ssm_elems_ = 0;
  kernels::DeviceBuffer conv_;  // [entries, layers, conv_elems] bf16
  kernels::DeviceBuffer ssm_;   // [entries, layers, ssm_elems] f32 (fresh zero pages are +0.0f)
};

}  // namespace fp4serve::model
