// A zero-filled buffer whose pages are not touched until used: calloc hands large sizes out as fresh
// mmap'd pages the kernel zeroes on first touch. The KV cache and state arenas are sized for the
// whole cache budget (gigabytes), so std::vector's eager zeroing would cost seconds at start-up and
// the full budget in resident memory before the first request.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace fp4serve::model {

template <class T>
class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  explicit ZeroedBuffer(std::size_t count)
      : data_(count ? static_cast<T*>(std::calloc(count, sizeof(T))) : nullptr), size_(count) {
    if (count && !data_) throw std::bad_alloc();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace fp4serve::model
