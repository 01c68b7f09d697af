#include "model/state_arena.h"

#include <stdexcept>
#include <string>

namespace fp4serve::model {

GdnStateArena::GdnStateArena(kernels::Backend& backend, int entries, int num_gdn_layers, const kernels::GdnDims& dims)
    : backend_(&backend),
      dims_(dims),
      entries_(entries),
      layers_(num_gdn_layers),
      conv_elems_(dims.conv_state_elems()),
      ssm_elems_(dims.state_elems()),
      conv_(backend.allocate(static_cast<size_t>(entries) * num_gdn_layers * dims.conv_state_elems() * 2,
                             "GDN conv states")),
      ssm_(backend.allocate(static_cast<size_t>(entries) * num_gdn_layers * dims.state_elems() * 4,
                            "GDN recurrent states")) {}

uint64_t GdnStateArena::entry_bytes(int num_gdn_layers, const kernels::GdnDims& dims) {
  return static_cast<uint64_t>(num_gdn_layers) *
         (static_cast<uint64_t>(dims.conv_state_elems()) * 2 + static_cast<uint64_t>(dims.state_elems()) * 4);
}

GdnStateRef GdnStateArena::ref(int entry, int layer) const {
  if (entry < 0 || entry >= entries_ || layer < 0 || layer >= layers_) {
    throw std::out_of_range("GDN state arena: entry " + std::to_string(entry) + " layer " + std::to_string(layer) +
                            " outside " + std::to_string(entries_) + " x " + std::to_string(layers_));
  }
  const size_t i = static_cast<size_t>(entry) * layers_ + layer;
  return {static_cast<uint16_t*>(conv_.data()) + i * conv_elems_, static_cast<float*>(ssm_.data()) + i * ssm_elems_};
}

void GdnStateArena::refs(int entry, std::span<GdnStateRef> out) const {
  if (static_cast<int>(out.size()) != layers_) throw std::invalid_argument("GDN state arena: refs span of the wrong size");
  for (int l = 0; l < layers_; ++l) out[static_cast<size_t>(l)] = ref(entry, l);
}

void GdnStateArena::zero(int entry) {
  if (layers_ == 0) return;
  // The entry's layers are contiguous: one view spanning them all.
  const GdnStateRef first = ref(entry, 0);
  backend_->zero(kernels::TensorView::contiguous(first.conv, DType::kBF16, {conv_elems_ * layers_}, backend_->device()));
  backend_->zero(kernels::TensorView::contiguous(first.ssm, DType::kF32, {ssm_elems_ * layers_}, backend_->device()));
}

void GdnStateArena::copy_from(const GdnStateArena& from, int src, int dst) {
  if (from.layers_ != layers_ || from.conv_elems_ != conv_elems_ || from.ssm_elems_ != ssm_elems_) {
    throw std::invalid_argument("GDN state arenas of different shapes");
  }
  if (layers_ == 0) return;
  const GdnStateRef s = from.ref(src, 0), d = ref(dst, 0);
  const kernels::Device dev = backend_->device();
  backend_->copy(kernels::TensorView::contiguous(d.conv, DType::kBF16, {conv_elems_ * layers_}, dev),
                 kernels::TensorView::contiguous(s.conv, DType::kBF16, {conv_elems_ * layers_}, dev));
  backend_->copy(kernels::TensorView::contiguous(d.ssm, DType::kF32, {ssm_elems_ * layers_}, dev),
                 kernels::TensorView::contiguous(s.ssm, DType::kF32, {ssm_elems_ * layers_}, dev));
}

}  // namespace fp4serve::model
