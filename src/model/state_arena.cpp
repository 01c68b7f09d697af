#include "model/state_arena.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fp4serve::model {

GdnStateArena::GdnStateArena(int entries, int num_gdn_layers, const kernels::GdnDims& dims)
    : entries_(entries),
      layers_(num_gdn_layers),
      conv_elems_(dims.conv_state_elems()),
      ssm_elems_(dims.state_elems()),
      conv_(static_cast<size_t>(entries) * num_gdn_layers * dims.conv_state_elems()),
      ssm_(static_cast<size_t>(entries) * num_gdn_layers * dims.state_elems()) {}

uint64_t GdnStateArena::entry_bytes(int num_gdn_layers, const kernels::GdnDims& dims) {
  return static_cast<uint64_t>(num_gdn_layers) *
         (static_cast<uint64_t>(dims.conv_state_elems()) * 2 + static_cast<uint64_t>(dims.state_elems()) * 4);
}

GdnStateRef GdnStateArena::ref(int entry, int layer) {
  if (entry < 0 || entry >= entries_ || layer < 0 || layer >= layers_) {
    throw std::out_of_range("GDN state arena: entry " + std::to_string(entry) + " layer " + std::to_string(layer) +
                            " outside " + std::to_string(entries_) + " x " + std::to_string(layers_));
  }
  const size_t i = static_cast<size_t>(entry) * layers_ + layer;
  return {conv_.data() + i * conv_elems_, ssm_.data() + i * ssm_elems_};
}

std::vector<GdnStateRef> GdnStateArena::refs(int entry) {
  std::vector<GdnStateRef> out;
  out.reserve(static_cast<size_t>(layers_));
  for (int l = 0; l < layers_; ++l) out.push_back(ref(entry, l));
  return out;
}

void GdnStateArena::zero(int entry) {
  const GdnStateRef first = ref(entry, 0);
  std::fill_n(first.conv, conv_elems_ * layers_, uint16_t{0});
  std::fill_n(first.ssm, ssm_elems_ * layers_, 0.0f);
}

void GdnStateArena::copy_from(const GdnStateArena& from, int src, int dst) {
  if (from.layers_ != layers_ || from.conv_elems_ != conv_elems_ || from.ssm_elems_ != ssm_elems_) {
    throw std::invalid_argument("GDN state arenas of different shapes");
  }
  auto& source = const_cast<GdnStateArena&>(from);  // ref() is non-const only because it hands out pointers
  const GdnStateRef s = source.ref(src, 0), d = ref(dst, 0);
  std::copy_n(s.conv, conv_elems_ * layers_, d.conv);
  std::copy_n(s.ssm, ssm_elems_ * layers_, d.ssm);
}

}  // namespace fp4serve::model
