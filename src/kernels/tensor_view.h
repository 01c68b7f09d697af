// Device-tagged, non-owning views of tensors: what crosses the backend seam (backend.h). A view is
// a pointer, an element type, up to four dimensions with strides in elements, and the device whose
// memory the pointer is in. The model builds views over memory a backend allocated (the step
// workspace, the KV cache, state arenas) and hands them to the backend's ops; it never reads
// through a view itself, so the same model code runs whether the bytes are in host or GPU memory.
//
// Rows: dimension 0 is the outermost. A "matrix" view is rank 2 [rows, cols]; rows may be strided
// (stride[0] >= cols) but elements within a row are contiguous (stride[1] == 1) for every op that
// does not say otherwise. A backend whose op cannot take a layout rejects the view
// (std::invalid_argument); it never reads it as another layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "tensor/dtype.h"

namespace fp4serve::kernels {

enum class Device : uint8_t { kCpu, kCuda };

inline const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

struct TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};  // elements

  // A contiguous view of `shape` at `data`.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = Device::kCpu) {
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    v.rank = static_cast<int>(shape.size());
    if (v.rank > kMaxRank) throw std::invalid_argument("TensorView: rank above 4");
    int i = 0;
    for (int64_t s : shape) v.shape[static_cast<size_t>(i++)] = s;
    int64_t step = 1;
    for (int d = v.rank - 1; d >= 0; --d) {
      v.stride[static_cast<size_t>(d)] = step;
      step *= v.shape[static_cast<size_t>(d)];
    }
    return v;
  }

  int64_t dim(int d) const { return shape[static_cast<size_t>(d)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= shape[static_cast<size_t>(d)];
    return n;
  }
  std::size_t element_size() const { return dtype_size(dtype); }
  bool is_contiguous() const {
    int64_t step = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (shape[static_cast<size_t>(d)] != 1 && stride[static_cast<size_t>(d)] != step) return false;
      step *= shape[static_cast<size_t>(d)];
    }
    return true;
  }
  // Bytes a contiguous view spans.
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * element_size(); }

  // Rows [r0, r0 + n) of dimension 0 (same rank).
  TensorView rows(int64_t r0, int64_t n) const {
    if (rank == 0 || r0 < 0 || n < 0 || r0 + n > shape[0])
      throw std::out_of_range("TensorView::rows: [" + std::to_string(r0) + ", " + std::to_string(r0 + n) +
                              ") outside " + std::to_string(rank ? shape[0] : 0) + " rows");
    TensorView v = *this;
    v.data = static_cast<char*>(data) + static_cast<std::size_t>(r0 * stride[0]) * element_size();
    v.shape[0] = n;
    return v;
  }

  // The same bytes as a contiguous view of another shape (numel must agree).
  TensorView reshaped(std::initializer_list<int64_t> new_shape) const {
    if (!is_contiguous()) throw std::invalid_argument("TensorView::reshaped: view is not contiguous");
    TensorView v = contiguous(data, dtype, new_shape, device);
    if (v.numel() != numel()) throw std::invalid_argument("TensorView::reshaped: element count differs");
    return v;
  }

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Throws std::invalid_argument naming `what` unless the view has the dtype, the rank and (where not
// -1) the extents given. The ops call it on every argument before touching memory.
inline void expect_view(const TensorView& v, DType dtype, std::initializer_list<int64_t> shape, const char* what) {
  bool ok = v.dtype == dtype && v.rank == static_cast<int>(shape.size()) && v.data != nullptr;
  int d = 0;
  for (int64_t s : shape) {
    if (ok && s >= 0 && v.shape[static_cast<size_t>(d)] != s) ok = false;
    ++d;
  }
  if (ok && v.rank > 0 && v.stride[static_cast<size_t>(v.rank - 1)] != 1) ok = false;
  if (!ok) {
    std::string want = "[";
    d = 0;
    for (int64_t s : shape) want += (d++ ? ", " : "") + (s < 0 ? std::string("*") : std::to_string(s));
    std::string got = "[";
    for (int i = 0; i < v.rank; ++i) got += (i ? ", " : "") + std::to_string(v.shape[static_cast<size_t>(i)]);
    throw std::invalid_argument(std::string(what) + ": expected a " + std::string(dtype_name(dtype)) + " " + want +
                                "] view with unit inner stride, got " + std::string(dtype_name(v.dtype)) + " " + got +
                                "]" + (v.data ? "" : " (null)"));
  }
}

}  // namespace fp4serve::kernels
